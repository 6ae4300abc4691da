"""Commands to inspect and replay webhook deliveries in the inbox."""

from __future__ import annotations

import json

import click

from bot.cli.base import CommandFailed, Context, UserError, echo_json, note, pass_context
from bot.escapes import escaped
from playbook.deliveries import inbox, side_effects
from playbook.models import DELIVERY_STATUSES, Delivery, SideEffect


def _payload(text: str) -> object:
    # A row stored before the receiver checked bodies may hold anything; show it as text.
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def delivery_json(delivery: Delivery, *, payload: bool = False) -> dict[str, object]:
    """An inbox row as a JSON-ready dict."""
    data: dict[str, object] = {
        "id": delivery.id,
        "source": delivery.source,
        "event": delivery.event,
        "action": delivery.action,
        "delivery_id": delivery.delivery_id,
        "installation_id": delivery.installation_id,
        "status": delivery.status,
        "reason": delivery.reason,
        "attempts": delivery.attempts,
        "error_kind": delivery.error_kind,
        "last_error": delivery.last_error,
        "received_at": delivery.received_at,
        "next_attempt_at": delivery.next_attempt_at,
        "processed_at": delivery.processed_at,
    }
    if payload:
        data["traceback"] = delivery.last_traceback
        data["headers"] = delivery.headers
        data["payload"] = _payload(delivery.payload)
    return data


def side_effect_json(effect: SideEffect) -> dict[str, object]:
    """A side-effect log line as a JSON-ready dict, with the comment text it kept."""
    return {
        "id": effect.id,
        "at": effect.at,
        "target": effect.target,
        "action": effect.action,
        "ticket_key": effect.ticket_key,
        "status": effect.status,
        "detail": effect.detail,
        "purpose": effect.purpose,
        "bullet_ids": effect.bullet_ids,
        "installation_id": effect.installation_id,
        "body": effect.body,
    }


@click.group(name="deliveries")
def deliveries_group() -> None:
    """Inspect and replay webhook deliveries."""


@deliveries_group.command(name="list")
@click.option("--status", type=click.Choice(DELIVERY_STATUSES), default=None)
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10000))
@click.option("--json", "as_json", is_flag=True)
@pass_context
def list_(ctx: Context, status: str | None, limit: int, as_json: bool) -> None:
    """The newest deliveries."""
    with ctx.transaction() as session:
        rows = inbox.listing(session, status, limit)
    if as_json:
        echo_json([delivery_json(row) for row in rows])
        return
    if not rows:
        note("no deliveries")
        return
    click.echo(
        f"{'ID':>6} {'SOURCE':<6} {'EVENT':<32} {'OUTCOME':<8} {'TRIES':>5} "
        f"{'RECEIVED (UTC)':<19} {'DELIVERY':<36} WHY"
    )
    for row in rows:
        # The event, action, delivery id and error come from outside: escaped, one line.
        name = escaped(f"{row.event}{f'.{row.action}' if row.action else ''}")
        # Done or ignored: what a part of the bot skipped and why; otherwise the last error.
        why = row.reason if row.status in ("done", "ignored") else row.last_error
        why = escaped(why.splitlines()[0][:80]) if why else ""
        guid = escaped(row.delivery_id[:36])
        click.echo(
            f"{row.id:>6} {row.source:<6} {name[:32]:<32} {row.status:<8} {row.attempts:>5} "
            f"{row.received_at:%Y-%m-%d %H:%M:%S} {guid:<36} {why}".rstrip()
        )


@deliveries_group.command()
@click.argument("delivery")
@pass_context
def show(ctx: Context, delivery: str) -> None:
    """One delivery with its headers, payload, last error and side effects (by id or GUID)."""
    with ctx.transaction() as session:
        row = inbox.get(session, delivery)
        effects = side_effects.for_deliveries(session, [row.delivery_id])[row.delivery_id]
        data = delivery_json(row, payload=True)
        data["side_effects"] = [side_effect_json(effect) for effect in effects]
    echo_json(data)


@deliveries_group.command()
@click.argument("delivery", required=False)
@click.option("--status", type=click.Choice(["failed", "dead"]), default=None)
@pass_context
def replay(ctx: Context, delivery: str | None, status: str | None) -> None:
    """Queue a delivery (or every failed/dead one) for processing again."""
    if (delivery is None) == (status is None):
        raise UserError("name one delivery, or use --status dead (or failed)")
    with ctx.transaction() as session:
        if status is not None:
            count = inbox.replay_status(session, status)
        else:
            count = inbox.replay(session, [inbox.get(session, delivery or "")])
    click.echo(f"queued {count} deliver{'y' if count == 1 else 'ies'} for processing")


@deliveries_group.command()
@click.argument("delivery")
@pass_context
def repost(ctx: Context, delivery: str) -> None:
    """Post the comments a delivery skipped for missing credentials, once they are set."""
    from bot.repost import CannotRepost
    from bot.repost import repost as post_again
    from bot.services import Services

    try:
        results = post_again(Services(engine=ctx.engine, settings=ctx.settings), delivery)
    except CannotRepost as error:
        # Exit 1, not a usage error: the command was right, the bot cannot post (yet).
        raise CommandFailed(str(error)) from None
    for result in results:
        click.echo(result.describe())
