"""`playbook-bot agents-md`: sync a repository's AGENTS.md block now, or show each sync."""

from __future__ import annotations

import re
from dataclasses import asdict

import click

from bot.cli.base import Context, UserError, echo_json, github_errors, note, pass_context

REPO_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}")


@click.group("agents-md")
def agents_md_group() -> None:
    """Keep the best lessons in a repository's AGENTS.md through one pull request."""


@agents_md_group.command()
@click.option("--repo", required=True, metavar="OWNER/NAME", help="The repository to sync.")
@click.option("--dry-run", is_flag=True, help="Print the block and the diff; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--resume", is_flag=True, help="Lift a pause (a sync PR closed unmerged) first.")
@pass_context
def sync(ctx: Context, repo: str, dry_run: bool, as_json: bool, resume: bool) -> None:
    """Commit the block to playbook-bot/agents-md and open or update its pull request."""
    from bot import agents_md, repo_settings
    from bot.github import NotConfigured
    from bot.services import Services
    from playbook import db
    from playbook.repos import syncs

    if not REPO_NAME.fullmatch(repo):
        raise UserError(f"--repo {repo!r} is not OWNER/NAME")
    services = Services(engine=ctx.engine, settings=ctx.settings)
    try:
        with github_errors(ctx.settings, repo=repo):
            installation_id = repo_settings.installation_for(services, repo)
            if resume and not dry_run:
                with db.transaction(ctx.engine) as session:
                    if syncs.resume(session, repo, "resumed from the command line"):
                        note(f"{repo}: pause lifted")
            report = agents_md.sync(
                services,
                repo,
                installation_id=installation_id,
                dry_run=dry_run,
                ignore_pause=resume,
            )
    except NotConfigured as missing:
        raise UserError(str(missing)) from None
    if as_json:
        echo_json(asdict(report))
        return
    if report.action == "dry_run":
        click.echo(report.block or "")
        click.echo("")
        click.echo(report.diff or f"(no change to {report.path})", nl=not report.diff)
    click.echo(report.message)


@agents_md_group.command()
@click.option("--json", "as_json", is_flag=True, help="Print the states as JSON.")
@pass_context
def status(ctx: Context, as_json: bool) -> None:
    """Each repository's sync: its file, its pull request, the last result, any pause."""
    from playbook import clock
    from playbook.repos import syncs

    with ctx.transaction() as session:
        states = syncs.every(session)
    now = clock.now()
    if as_json:
        echo_json(
            [
                asdict(state) | {"paused": bool(state.paused_until and state.paused_until > now)}
                for state in states
            ]
        )
        return
    if not states:
        click.echo(
            "no repository has been synced yet: set `agents_md: {enabled: true}` in its "
            ".github/playbook-bot.yml, then `playbook-bot agents-md sync --repo OWNER/NAME`"
        )
        return
    for state in states:
        pull = state.pull_url or (f"#{state.pull_number}" if state.pull_number else "no PR")
        line = f"{state.repo}  {state.path}  {pull}"
        if state.paused_until and state.paused_until > now:
            line += f"  paused until {state.paused_until:%Y-%m-%d} ({state.paused_reason})"
        when = f"{state.synced_at:%Y-%m-%d %H:%M} UTC" if state.synced_at else "never synced"
        click.echo(f"{line}  {when}: {state.last_result or '-'}")
