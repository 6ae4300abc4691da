"""`embed --backfill`: queue an embedding job for each active lesson whose embedding is stale."""

from __future__ import annotations

import click

from bot.cli.base import Context, UserError, echo_json, note, pass_context


@click.command()
@click.option(
    "--backfill",
    is_flag=True,
    help="Queue a job for each active lesson with no embedding, or one of another text or model.",
)
@click.option("--dry-run", is_flag=True, help="Only count the lessons that would be queued.")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def embed(ctx: Context, backfill: bool, dry_run: bool, as_json: bool) -> None:
    """Queue the embedding of active lessons whose embedding is missing or stale (--backfill).

    A lesson is stale when it has no embedding, one by another model (PLAYBOOK_EMBEDDING_MODEL
    changed) or one of an older text. The model worker (`worker`, `serve`) runs the jobs, one
    request per lesson within PLAYBOOK_MODEL_DAILY_CALLS; this command only queues them.
    Lessons are queued on their own when created or edited; this is for lessons from before
    the embedding model was set, and after it changes.
    """
    from bot import embeddings

    if not backfill:
        raise click.UsageError(
            "say --backfill: lessons are otherwise queued as they are created and edited",
            click.get_current_context(),
        )
    settings = ctx.settings
    if not settings.embeddings_enabled:
        raise UserError(embeddings.NOT_CONFIGURED)
    model = settings.embedding_model or ""

    def progress(done: int, total: int) -> None:
        if not as_json and total > embeddings.BACKFILL_BATCH:
            note(f"queued {done} of {total}")

    result = embeddings.backfill(ctx.engine, model, dry_run=dry_run, progress=progress)
    stale, queued, waiting = result.stale, result.queued, result.waiting
    if as_json:
        echo_json(
            {
                "model": model,
                "dry_run": dry_run,
                "stale": stale,
                "queued": queued,
                "already_queued": waiting,
            }
        )
        return
    count = len(stale) - len(waiting) if dry_run else len(queued)
    jobs = f"{count} embedding job{'' if count == 1 else 's'}"
    lessons = f"{len(stale)} active lesson{'' if len(stale) == 1 else 's'}"
    verb = "would queue" if dry_run else "queued"
    waits = f" ({len(waiting)} already waiting for the worker)" if waiting else ""
    click.echo(f"{verb} {jobs} for {model}: {lessons} not embedded or stale{waits}")
    if count:
        # The command only queues: whoever waits for the rerank must know who computes them.
        click.echo(
            f"{'this only queues them: ' if not dry_run else 'once queued, '}"
            "the model worker runs them (`playbook-bot worker` or `serve`), within "
            "PLAYBOOK_MODEL_DAILY_CALLS and PLAYBOOK_MODEL_DAILY_TOKENS"
        )
