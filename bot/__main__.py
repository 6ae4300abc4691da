"""Allow `python -m bot` as well as the `playbook-bot` console script."""

from bot.cli import main

main()
