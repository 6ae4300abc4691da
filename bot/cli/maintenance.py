"""Scheduled upkeep commands: prune unused lessons, reconcile missed deliveries, purge old logs."""

from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta

import click

from bot.cli.base import (
    CommandFailed,
    Context,
    UserError,
    echo_json,
    github_errors,
    note,
    one_line,
    pass_context,
)
from playbook import upkeep
from playbook.deliveries import retention


@click.command()
@click.option("--apply", "apply_", is_flag=True, help="Archive the candidates (default: dry run).")
@click.option("--idle-days", default=30, show_default=True, type=click.IntRange(1, 3650))
@click.option("--min-age-days", default=30, show_default=True, type=click.IntRange(0, 3650))
@click.option("--min-observation-days", default=30, show_default=True, type=click.IntRange(0, 3650))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--markdown", is_flag=True, help="Print Markdown (for $GITHUB_STEP_SUMMARY).")
@pass_context
def prune(
    ctx: Context,
    apply_: bool,
    idle_days: int,
    min_age_days: int,
    min_observation_days: int,
    as_json: bool,
    markdown: bool,
) -> None:
    """Archive active lessons nobody loaded or cited for --idle-days (dry run by default)."""
    if as_json and markdown:
        raise UserError("choose one of --json and --markdown")
    with ctx.transaction() as session:
        report = upkeep.prune(
            session,
            apply=apply_,
            idle_days=idle_days,
            min_age_days=min_age_days,
            min_observation_days=min_observation_days,
            actor=ctx.actor,
            effect_min_tickets=ctx.settings.effect_min_tickets,
        )
    if report.harmful and not (as_json or markdown):
        # First, as in every prune: the strongest evidence the playbook has.
        verb = "deprecated" if report.applied else "would deprecate"
        click.echo(f"{verb} {len(report.harmful)} lesson(s) measured harmful by the holdout:")
        for line in upkeep.harm_lines(report.harmful):
            click.echo(f"  {line}")
    if as_json:
        echo_json(asdict(report))
    elif markdown:
        click.echo(upkeep.prune_markdown(report), nl=False)
    elif report.blocked:
        click.echo(f"nothing pruned: {report.blocked}")
    elif not report.candidates:
        click.echo(f"every active lesson was loaded or cited in the last {idle_days} days")
    else:
        verb = "archived" if report.applied else "would archive"
        click.echo(f"{verb} {len(report.candidates)} lesson(s):")
        for c in report.candidates:
            last_load = f"{c.last_loaded_at:%Y-%m-%d}" if c.last_loaded_at else "never"
            last_cite = f"{c.last_cited_at:%Y-%m-%d}" if c.last_cited_at else "never"
            click.echo(
                f"  {c.bullet_id:<8} age {c.age_days}d, last loaded {last_load}, "
                f"last cited {last_cite}, {c.loads} loads, {c.cites} cites: {c.text[:60]}"
            )
        if not report.applied:
            note("dry run: add --apply to archive them (`restore ID` undoes it)")
    if report.kept and not (as_json or markdown):
        # Idle, but the evidence says they help: a person decides (`archive ID` if so).
        click.echo(
            f"kept {len(report.kept)} idle lesson(s) cited in more merged than rejected work "
            "or measured helpful by the holdout:"
        )
        for c in report.kept:
            why = (
                "measured helpful"
                if c.bullet_id in report.measured_helpful
                else f"{c.cites_success} merged, {c.cites_failure} rejected"
            )
            click.echo(f"  {c.bullet_id:<8} {why}: {c.text[:60]}")


@click.command()
@click.option(
    "--since", default="72h", show_default=True, help="How far back (GitHub keeps 3 days)."
)
@click.option("--dry-run", is_flag=True, help="Only list what would be redelivered.")
@pass_context
def reconcile(ctx: Context, since: str, dry_run: bool) -> None:
    """Ask GitHub to redeliver failed App webhook deliveries that never reached the inbox."""
    from bot.backfill import parse_since
    from bot.github import GitHubClients, NotConfigured
    from bot.reconcile import reconcile as run

    try:
        span = parse_since(since)
    except ValueError as error:
        raise UserError(f"--since: {error}") from None
    try:
        with github_errors(ctx.settings):
            report = run(ctx.engine, GitHubClients(ctx.settings), span, dry_run=dry_run)
    except NotConfigured as error:
        needs = "" if ctx.settings.github_app_id else "; reconcile needs the GitHub App"
        raise UserError(f"{error}{needs}") from None
    verb = "would redeliver" if dry_run else "redelivered"
    click.echo(
        f"checked {report.checked} deliveries: {report.failed} failed, "
        f"{report.already_in_inbox} of those already in the inbox, {verb} {len(report.redelivered)}"
    )
    for guid in report.redelivered:
        click.echo(f"  {guid}")
    for problem in report.errors:
        note(f"  {one_line(problem)}")
    if report.errors:
        raise CommandFailed(
            f"{len(report.errors)} of the redeliveries failed (above); "
            "run reconcile again to retry them"
        )


@click.command()
@click.option(
    "--older-than",
    metavar="SPAN",
    help="Age of the rows to delete: 30d, 72h, 2w (default: PLAYBOOK_RETENTION_DAYS days).",
)
@click.option("--dry-run", is_flag=True, help="Only count what would be deleted.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_context
def purge(ctx: Context, older_than: str | None, dry_run: bool, as_json: bool) -> None:
    """Delete finished webhook deliveries, side-effect and retrieval logs older than a span."""
    from bot.backfill import parse_since

    if older_than is None:
        span = timedelta(days=ctx.settings.retention_days)
    else:
        try:
            span = parse_since(older_than)
        except ValueError as error:
            raise UserError(f"--older-than: {error}") from None
    with ctx.transaction() as session:
        report = retention.purge(session, older_than=span, dry_run=dry_run)
    if as_json:
        echo_json(report.as_dict())
    else:
        click.echo(retention.summary(report))
