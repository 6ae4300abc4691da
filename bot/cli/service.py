"""Commands that run the bot: serve (app + embedded worker) and worker (the worker alone)."""

from __future__ import annotations

import signal
import threading

import click

from bot.cli.base import Context, note, pass_context
from bot.worker import Services, Worker


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535))
@click.option("--threads", default=4, show_default=True, type=click.IntRange(1, 64))
@pass_context
def serve(ctx: Context, host: str, port: int, threads: int) -> None:
    """Serve the webhook endpoints and process deliveries in the same process."""
    from bot.server import EmbeddedServer

    # Create or check the schema before accepting deliveries; the server process opens its
    # own engine after gunicorn forks, so this one is closed rather than inherited.
    ctx.engine.dispose()
    note(f"playbook-bot listening on http://{host}:{port} (POST /webhooks/github, /webhooks/jira)")
    EmbeddedServer(ctx.settings, host, port, threads).run()


@click.command()
@click.option("--once", is_flag=True, help="Process what is due now, then exit.")
@pass_context
def worker(ctx: Context, once: bool) -> None:
    """Process inbox deliveries (run beside gunicorn in production)."""
    runner = Worker(Services(engine=ctx.engine, settings=ctx.settings))
    if once:
        total = 0
        while batch := runner.run_once():
            total += batch
        click.echo(f"processed {total} deliveries")
        return
    from bot import scheduler

    stop = threading.Event()
    # Finish the delivery in hand on SIGTERM/SIGINT; the lease covers a hard kill.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    schedule = scheduler.start(ctx.engine, ctx.settings)
    try:
        runner.run(stop)
    finally:
        if schedule is not None:
            schedule.shutdown(wait=False)
