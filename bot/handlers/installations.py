"""GitHub App installations: remember them, and stop acting for removed ones."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot import payloads
from bot.handlers.router import Event, Router
from playbook import db
from playbook.deliveries import installations

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)
router = Router()


@router.register("github", "installation")
def installation_changed(event: Event, services: Services) -> None:
    """Record installation created/deleted (and suspended/unsuspended)."""
    data = payloads.InstallationEvent.model_validate(event.payload).installation
    installation_id = data.id
    account = data.account.login if data.account else None
    status = "deleted" if event.action in ("deleted", "suspend") else "active"
    with db.transaction(services.engine) as session:
        installations.record(session, installation_id, account, status)
    if status == "deleted":
        services.out.forget_installation(installation_id)
    log.info("installation %s (%s) is %s", installation_id, account, status)
