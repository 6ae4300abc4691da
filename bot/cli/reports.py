"""Reports: stats, and the demo that ends with them."""

from __future__ import annotations

import logging
import shlex
from pathlib import Path
from typing import Any

import click

from bot.cli.base import Context, UserError, echo_json, pass_context
from playbook import upkeep


def format_stats(report: dict[str, Any]) -> str:
    """The stats as a short human report."""
    bullets, used, coverage = report["bullets"], report["usage"], report["coverage"]
    statuses = ", ".join(f"{n} {status}" for status, n in sorted(bullets["by_status"].items()))
    lines = [f"bullets: {bullets['total']} ({statuses or 'none'})"]
    for scope, counts in sorted(bullets["by_scope"].items()):
        lines.append(f"  {scope}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    lines.append(
        f"usage: {used['loads']} loads, {used['cites']} cites "
        f"({used['successes']} in merged work, {used['failures']} in rejected work, "
        f"{used['unknown_outcome']} pending)"
    )
    if used.get("not_counted"):
        lines.append(
            f"  not counted: {used['not_counted']} reports about tickets the bot never saw"
        )
    share = coverage["share"]
    lines.append(
        f"coverage: {coverage['with_lessons']} of {coverage['tickets']} tickets got lessons"
        + (f" ({share:.0%})" if share is not None else "")
    )
    spoke = report.get("comments") or {}
    if spoke.get("tickets"):
        lines.append(
            f"comments: posted on {spoke['posted']} of {spoke['tickets']} tickets "
            f"({spoke['share_posted']:.0%}); kept quiet on {spoke['abstained']} "
            "(no lesson reached the relevance floor)"
        )
    else:
        lines.append("comments: no ticket judged yet")
    if report.get("off_topic"):
        lines.append("often marked as not fitting (`playbook-bot relevance` for more):")
        lines.extend(
            f"  {o['id']} -{o['unhelpful']}/+{o['helpful']} by {o['people']} people on "
            f"{o['tickets']} tickets: {o['text'][:70]}"
            for o in report["off_topic"]
        )
    rate, pairs = report["cite_rate"], report["cite_rate_counts"]
    lines.append(
        f"cite rate: {rate:.0%} ({pairs['cited']} of {pairs['loaded']} lessons shown on a "
        "ticket were cited on it)"
        if rate is not None
        else "cite rate: no lessons shown on a ticket yet"
    )
    rated = report.get("ratings") or {}
    lines.append(
        f"ratings: {rated['count']} by the model on {rated['lessons']} lessons, "
        f"mean {rated['mean']:+.2f}"
        if rated.get("count")
        else "ratings: no lesson rated by the model yet"
    )
    for title, key in (("most helpful", "most_helpful"), ("most harmful", "most_harmful")):
        if report[key]:
            lines.append(f"{title}:")
            lines.extend(
                f"  {b['id']} (+{b['cites_success']}/-{b['cites_failure']}, "
                f"confidence {b['confidence']:.2f}) {b['text'][:70]}"
                for b in report[key]
            )
    if report.get("measured_harmful"):
        lines.append("measured harmful by the holdout (`prune --apply` deprecates them):")
        lines.extend(
            f"  {h['id']} merge rate {100 * h['difference']:+.0f} points when shown "
            f"(95% CI {100 * h['ci'][0]:+.0f} to {100 * h['ci'][1]:+.0f}) {h['text'][:60]}"
            for h in report["measured_harmful"]
        )
    if report.get("scopes"):
        lines.extend(format_scopes(report["scopes"]))
    if report["recently_demoted"]:
        lines.append("demoted in the last 30 days:")
        lines.extend(
            f"  {b['id']} {b['status']} on {b['demoted_on']:%Y-%m-%d}: {b['demoted_reason']}"
            for b in report["recently_demoted"]
        )
    lines.extend(stale_lines(report.get("stale")))
    return "\n".join(lines)


# The week's stale flags by how they ended, as `stats` words them.
_RESOLVED = {
    "cleared": "cleared",
    "edited": "edited",
    "superseded": "superseded",
    "deprecated": "deprecated",
    "deprecated_by_bot": "deprecated by the bot",
    "open": "open",
}


def stale_lines(stale: dict[str, Any] | None) -> list[str]:
    """The stale flags: how many wait for a maintainer, and the week's flags resolved."""
    if not stale or not (stale["flagged"] or stale["week"]["flagged"]):
        return []
    week = stale["week"]
    how = ", ".join(f"{week[k]} {label}" for k, label in _RESOLVED.items() if week.get(k))
    lessons = "lesson" if stale["flagged"] == 1 else "lessons"
    return [
        f"possibly stale: {stale['flagged']} {lessons} flagged (`playbook-bot stale`); "
        f"last 7 days: {week['flagged']} flagged" + (f" ({how})" if how else "")
    ]


def format_scopes(scopes: list[dict[str, Any]]) -> list[str]:
    """Each scope's size against its context budget, as a small table."""
    width = max(len("scope"), *(len(s["scope"]) for s in scopes))
    lines = ["context budget:", f"  {'scope':<{width}}  lessons  chars / budget  share"]
    for s in scopes:
        over = "  past 75%: consolidate" if s["over"] else ""
        lines.append(
            f"  {s['scope']:<{width}}  {s['lessons']:>7}  {s['chars']:,} / {s['budget']:,}  "
            f"{s['share']:.0%}{over}"
        )
    return lines


@click.command()
@click.option("--json", "as_json", is_flag=True)
@pass_context
def stats(ctx: Context, as_json: bool) -> None:
    """How the playbook is doing: bullets, usage, coverage, best and worst lessons."""
    from bot.consolidate import budget_for
    from playbook.stats_answer import scope_budgets

    budgets = budget_for(ctx)
    with ctx.transaction() as session:
        report = upkeep.stats(session, effect_min_tickets=ctx.settings.effect_min_tickets)
        report["scopes"] = scope_budgets(session, budgets)
    if as_json:
        echo_json(report)
    else:
        click.echo(format_stats(report))


@click.command()
@click.option("--quiet", is_flag=True, help="Do not print the comments the bot would post.")
@click.option("--verbose", is_flag=True, help="Also print the bot's log lines.")
@click.option(
    "--keep",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="PATH",
    help="Keep the demo's playbook in this SQLite file, for `serve` to show. Only a new or "
    "empty file, or a previous demo's, which it replaces.",
)
def demo(quiet: bool, verbose: bool, keep: Path | None) -> None:
    """Run the whole loop on a temporary playbook, with no credentials and no network.

    With --keep PATH the playbook is kept in PATH (SQLite) and the command prints how to
    serve it. PATH must be new, an empty file, or a playbook an earlier `demo --keep` kept,
    which is replaced; any other file is refused, untouched.
    """
    # The CLI is the composition root, the one part of bot that may import the web edge;
    # it does so here, on use, so the other commands never load Flask.
    from webhooks import demo_file
    from webhooks.demo import run

    if keep is not None:
        keep = keep.absolute()
        problem = demo_file.refusal(keep)
        if problem is not None:
            raise click.BadParameter(problem, param_hint="'--keep'")
    if not verbose:
        # The demo prints what the bot would do; its INFO log would bury that.
        logging.getLogger().setLevel(logging.WARNING)

    try:
        report = run(echo=not quiet, keep=keep)
    except FileExistsError as error:  # PATH changed while the demo ran
        raise UserError(str(error)) from None
    click.echo("\nFinal stats:")
    click.echo(format_stats(report))
    if keep is not None:
        for line in served(demo_file.database_url(keep)):
            click.echo(line)


def served(url: str) -> list[str]:
    """How to see a kept demo playbook on the web page: the exact command, and the address."""
    command = (
        f"PLAYBOOK_DATABASE_URL={shlex.quote(url)} PLAYBOOK_UI_PUBLIC_READ=true playbook-bot serve"
    )
    return [
        f"\nKept the playbook in {url.removeprefix('sqlite:///')}; a later `demo --keep` on that "
        "path replaces it.",
        "See it on the web page (read-only; set PLAYBOOK_API_TOKEN too to log in and change "
        "things):",
        f"  {command}",
        "  then open http://127.0.0.1:8080/ui/",
    ]
