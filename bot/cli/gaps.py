"""`playbook-bot gaps`: recurring tickets no lesson fitted, grouped, where a lesson would pay."""

from __future__ import annotations

from typing import Any

import click

from bot.cli.base import Context, echo_json, pass_context
from playbook import clock
from playbook.gaps import report as gaps_report


def format_gaps(answer: dict[str, Any]) -> str:
    """The gaps as a short human report: each group's size, recurrence, words and tickets."""
    gaps = answer["gaps"]
    lines = [
        f"{len(gaps)} gap{'s' if len(gaps) != 1 else ''} (groups of at least {answer['min']} "
        f"similar tickets) among {answer['without_lessons']} tickets without a lesson, of "
        f"{answer['tickets']} seen in the last {answer['days']} days"
        + (" (only the newest were looked at)" if answer["capped"] else "")
    ]
    for gap in gaps:
        lines.append("")
        lines.append(
            f"{gap['size']} tickets, {gap['first_seen']:%Y-%m-%d} to {gap['last_seen']:%Y-%m-%d} "
            f"({gap['per_week']:g} a week): {', '.join(gap['words']) or '(no shared words)'}"
        )
        for ticket in gap["tickets"]:
            # A title is whatever the reporter typed: one line, so it cannot fake a row.
            title = " ".join(ticket["title"].split())[:100]
            where = f"  {ticket['url']}" if ticket["url"] else ""
            lines.append(f"  {ticket['key']}  {title}{where}")
    if not gaps:
        lines.append("nothing recurs without a lesson; lower --min or widen --days to look further")
    return "\n".join(lines)


@click.command()
@click.option(
    "--days",
    type=click.IntRange(1, gaps_report.MAX_DAYS),
    default=gaps_report.DAYS,
    show_default=True,
    help="Look at tickets first seen in this many days.",
)
@click.option(
    "--min",
    "minimum",
    type=click.IntRange(2),
    default=gaps_report.MINIMUM,
    show_default=True,
    help="A gap is a group of at least this many tickets.",
)
@click.option("--json", "as_json", is_flag=True)
@pass_context
def gaps(ctx: Context, days: int, minimum: int, as_json: bool) -> None:
    """Recent tickets that got no lesson, grouped by similarity: where to write lessons next."""
    from webhooks.ui.present import Links  # the same ticket links as the web pages

    with ctx.transaction() as session:
        found = gaps_report.find(session, now=clock.now(), days=days, minimum=minimum)
    answer = gaps_report.as_dict(found, Links(ctx.settings).ticket)
    if as_json:
        echo_json(answer)
    else:
        click.echo(format_gaps(answer))
