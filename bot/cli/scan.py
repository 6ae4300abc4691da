"""`playbook-bot scan`: the stored lessons that hold a credential, for CI and for a clean-up."""

from __future__ import annotations

import sys

import click

from bot.cli.base import Context, echo_json, note, pass_context
from playbook.lessons import credential_scan, secrets

FIX = (
    "deprecate each (`playbook-bot deprecate ID --reason 'holds a credential'`), edit the "
    "credential out (`playbook-bot edit ID --text ...`), and rotate it if it was real"
)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@pass_context
def scan(ctx: Context, as_json: bool) -> None:
    """List lessons that hold a credential (kind and place, never the value); exit 1 if any.

    Every status is read, deprecated and archived lessons too: they are still stored and
    shown on their pages. Exit 0 when none does, so CI can run it.
    """
    with ctx.transaction() as session:
        found = list(credential_scan.holding(session))
    if as_json:
        echo_json([entry.as_dict() for entry in found])
    else:
        for entry in found:
            where = f"{entry.bullet_id} [{entry.status}]"
            field = "" if entry.field == "text" else f" in {entry.field}"
            click.echo(f"{where}: {secrets.summary(entry.findings)}{field}")
    if found:
        lessons = len({entry.bullet_id for entry in found})
        verb = "lessons hold" if lessons != 1 else "lesson holds"
        note(f"{lessons} {verb} a credential; {FIX}")
        sys.exit(1)
    if not as_json:
        note("no lesson holds a credential")
