"""The `playbook-bot` command line: one group, with commands registered from small modules."""

from __future__ import annotations

from bot.cli import (
    bullets,
    database,
    deliveries,
    loop,
    maintenance,
    reports,
    search,
    service,
    transfer,
    usage,
)
from bot.cli.base import main

for module in (
    bullets,
    usage,
    transfer,
    database,
    deliveries,
    service,
    loop,
    reports,
    maintenance,
    search,
):
    module.register(main)

__all__ = ["main"]
