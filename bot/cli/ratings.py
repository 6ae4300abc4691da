"""`rate --backfill`: queue the model's rating of lessons shown to PRs closed before it was set."""

from __future__ import annotations

import click

from bot.cli.base import Context, UserError, pass_context

NO_MODEL = (
    "no model endpoint is set: set PLAYBOOK_MODEL_BASE_URL and PLAYBOOK_MODEL to rate lessons"
)


@click.command()
@click.option(
    "--backfill",
    is_flag=True,
    help="Queue a rating job for each closed PR that showed lessons it did not cite.",
)
@click.option(
    "--since", default="90d", show_default=True, help="PRs closed this recently: 90d, 12h, 2w."
)
@click.option("--dry-run", is_flag=True, help="Only list the PRs that would be queued.")
@pass_context
def rate(ctx: Context, backfill: bool, since: str, dry_run: bool) -> None:
    """Queue the model's rating of lessons shown to closed pull requests (--backfill).

    One job per PR closed in the --since window whose tickets were shown lessons it did not
    cite, that has no rating and no rating job yet (a dead job is queued again); at most 500
    PRs a run, the most recently closed first. The model worker (`worker`, `serve`) runs
    the jobs; this command only queues them.
    """
    from bot.backfill import parse_since
    from bot.model_jobs import queue_backfill
    from bot.services import Services
    from playbook.ratings.backfill import MAX_PULLS

    if not backfill:
        raise click.UsageError(
            "say --backfill: rating jobs are otherwise queued as PRs close",
            click.get_current_context(),
        )
    try:
        span = parse_since(since)
    except ValueError as error:
        raise UserError(f"--since: {error}") from None
    if not ctx.settings.model_enabled:
        raise UserError(NO_MODEL)
    result = queue_backfill(Services(engine=ctx.engine, settings=ctx.settings), span, dry_run)
    queued = set(result.queued)
    for pull in result.found:
        if dry_run:
            verb = "would queue"
        elif pull.key in queued:
            verb = "queued"
        else:
            verb = "already queued"  # a PR closing meanwhile queued its own job
        shown = f"{len(pull.lessons)} lesson{'' if len(pull.lessons) == 1 else 's'} shown"
        again = " (its last job died)" if pull.dead else ""
        click.echo(f"{verb} {pull.key}: {shown}, not cited{again}")
    count = len(result.found) if dry_run else len(result.queued)
    jobs = f"{count} rating job{'' if count == 1 else 's'}"
    total = f"would queue {jobs}" if dry_run else f"queued {jobs}"
    click.echo(f"{total} for pull requests closed in the last {since}")
    if result.more:
        rest = "a run queues these, the next run" if dry_run else "run it again for"
        click.echo(
            f"stopped at {MAX_PULLS} pull requests per run, the most recently closed first: "
            f"{rest} the older ones"
        )
    if count:
        # The command only queues: a person waiting for ratings must know who makes them.
        click.echo(
            f"{'this only queues them: ' if not dry_run else 'once queued, '}"
            "the model worker runs them (`playbook-bot worker` or `serve`), within "
            "PLAYBOOK_MODEL_DAILY_CALLS and PLAYBOOK_MODEL_DAILY_TOKENS"
        )
