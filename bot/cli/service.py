"""Commands that run the bot: serve (app + embedded worker) and worker (the worker alone)."""

from __future__ import annotations

import errno
import signal
import socket
import threading
from typing import TYPE_CHECKING

import click

from bot.cli.base import CommandFailed, Context, UserError, note, pass_context
from bot.services import Services
from bot.worker import Worker, start_thread

if TYPE_CHECKING:
    from bot.config import Settings


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535))
@click.option("--threads", default=4, show_default=True, type=click.IntRange(1, 64))
@pass_context
def serve(ctx: Context, host: str, port: int, threads: int) -> None:
    """Serve the webhook endpoints and process deliveries in the same process."""
    # The CLI is the composition root, the one part of bot that may import the web edge
    # (webhooks/ depends on bot, never the other way); loaded on use, so `worker` never is.
    from webhooks.server import EmbeddedServer, check_bind

    try:
        check_bind(host, port)
    except OSError as error:
        message = cannot_listen(host, port, error)
        # A --host that is not this machine's is a mistake in the command (exit 2); a port
        # someone else holds is not (exit 1).
        if isinstance(error, socket.gaierror) or error.errno == errno.EADDRNOTAVAIL:
            raise UserError(message) from None
        raise CommandFailed(message) from None
    # Create or check the schema before accepting deliveries; the server opens its own
    # engine, so this one's connections are closed rather than left idle.
    ctx.engine.dispose()
    server = EmbeddedServer(ctx.settings, host, port, threads)
    where = f"[{host}]" if ":" in host else host
    note(f"playbook-bot listening on http://{where}:{port} (POST /webhooks/github, /webhooks/jira)")
    note(web_page(ctx.settings, host, port))
    if server.setup_token:
        base = ctx.settings.public_url or f"http://{where}:{port}"
        note(f"no GitHub App is set up yet: open {base}/setup?token={server.setup_token}")
    server.run()


# A server listening on every address is reached on this machine as localhost.
_EVERY_ADDRESS = ("0.0.0.0", "::", "")


def web_page(settings: Settings, host: str, port: int) -> str:
    """The start-up line for people: the web page's address and how to log in (which variable
    holds the token, never its value)."""
    if host in _EVERY_ADDRESS:
        address = f"http://localhost:{port}/ui/ (or this machine's name)"
    else:
        address = f"http://{f'[{host}]' if ':' in host else host}:{port}/ui/"
    public = "read-only pages open to anyone (PLAYBOOK_UI_PUBLIC_READ)"
    if settings.api_token and settings.ui_public_read:
        login = f"{public}; log in with the token in PLAYBOOK_API_TOKEN to change things"
    elif settings.api_token:
        login = "log in with the token in PLAYBOOK_API_TOKEN"
    elif settings.ui_public_read:
        login = f"{public}; no login until PLAYBOOK_API_TOKEN is set"
    else:
        login = (
            "logins are off: set PLAYBOOK_API_TOKEN to a token of your choosing, restart, and "
            "log in with it (or PLAYBOOK_UI_PUBLIC_READ=true to read without one)"
        )
    return f"web page: {address}; {login}"


def cannot_listen(host: str, port: int, error: OSError) -> str:
    """Why ``serve`` cannot listen on ``host:port``, and which option changes it."""
    if isinstance(error, socket.gaierror):
        return f"--host {host!r} is neither an address nor a name this machine can resolve"
    if error.errno == errno.EADDRINUSE:
        return f"port {port} on {host} is in use; pick another with --port"
    if error.errno == errno.EACCES:
        return (
            f"port {port} on {host} needs privileges this user lacks (ports below 1024 "
            "usually do); pick another with --port"
        )
    if error.errno == errno.EADDRNOTAVAIL:
        return f"{host} is not an address of this machine; pick another with --host"
    return f"cannot listen on port {port} on {host} ({error.strerror}); check --host and --port"


@click.command()
@click.option("--once", is_flag=True, help="Process what is due now, then exit.")
@pass_context
def worker(ctx: Context, once: bool) -> None:
    """Process inbox deliveries (run beside gunicorn in production)."""
    services = Services(engine=ctx.engine, settings=ctx.settings)
    runner = Worker(services)
    if once:
        total = 0
        while batch := runner.run_once():
            total += batch
        if ctx.settings.model_enabled or ctx.settings.embeddings_enabled:
            jobs = Worker(services, queue="model")
            while batch := jobs.run_once():
                total += batch
        click.echo(f"processed {total} deliveries")
        return
    from bot import scheduler

    stop = threading.Event()
    # Finish the delivery in hand on SIGTERM/SIGINT; the lease covers a hard kill.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    schedule = scheduler.start(ctx.engine, ctx.settings)
    if ctx.settings.model_enabled or ctx.settings.embeddings_enabled:
        # Model jobs (embeddings too) on a worker thread of their own: a slow model never holds
        # up a delivery.
        start_thread(services, stop, queue="model")
    try:
        runner.run(stop)
    finally:
        if schedule is not None:
            schedule.shutdown(wait=False)
