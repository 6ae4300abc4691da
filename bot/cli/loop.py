"""Commands around the GitHub/Jira loop: doctor, backfill."""

from __future__ import annotations

import click

from bot.cli.base import Context, UserError, github_errors, note, pass_context
from bot.escapes import escaped


@click.command()
@pass_context
def doctor(ctx: Context) -> None:
    """Check every configured connection and say what works and what to fix."""
    from bot.doctor import run_checks

    problems = 0
    for check in run_checks(ctx.settings):
        mark = {"ok": "ok  ", "off": "--  ", "warn": "WARN", "fail": "FAIL"}[check.status]
        # A detail quotes settings files, error messages and Jira's answer: one line each.
        click.echo(f"[{mark}] {check.name}: {escaped(check.detail)}")
        problems += check.status == "fail"
    if problems:
        raise SystemExit(1)


@click.command()
@click.option("--repo", required=True, help="owner/name of the repository.")
@click.option("--since", default="90d", show_default=True, help="How far back: 90d, 12h, 2w.")
@pass_context
def backfill(ctx: Context, repo: str, since: str) -> None:
    """Apply closed pull requests from the API (links, lessons, cites, outcomes)."""
    from bot.backfill import backfill as run
    from bot.backfill import parse_since
    from bot.github import NotConfigured
    from bot.services import Services

    if repo.count("/") != 1 or not all(repo.split("/")):
        raise UserError(f"--repo must look like owner/name, not {repo!r}")
    try:
        span = parse_since(since)
    except ValueError as error:
        raise UserError(f"--since: {error}") from None
    try:
        with github_errors(ctx.settings, repo=repo):
            report = run(Services(engine=ctx.engine, settings=ctx.settings), repo, span)
    except NotConfigured as error:
        raise UserError(str(error)) from None
    click.echo(
        f"{report.seen} closed pull requests applied "
        f"({report.merged} merged, {report.closed_unmerged} closed without merge)"
    )
    for why in report.ignored:
        note(f"ignored: {why}")
