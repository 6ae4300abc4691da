"""Commands that read and change bullets: add, list, show, edit, approve, deprecate, archive..."""

from __future__ import annotations

import textwrap
from datetime import datetime
from typing import Any

import click

from bot.cli.base import Context, echo_json, note, pass_context
from bot.escapes import escaped
from playbook import clock
from playbook.lessons import characters, ids, lifecycle, replacements
from playbook.lessons.lifecycle import Change
from playbook.models import STATUSES, Rating, Revision
from playbook.outcomes import usage
from playbook.ratings import store as ratings


def revision_json(revision: Revision) -> dict[str, Any]:
    """A revision as a JSON-ready dict."""
    return {
        "revision": revision.id,
        "action": revision.action,
        "actor": revision.actor,
        "at": revision.at,
        "reason": revision.reason,
        "before": revision.before,
        "after": revision.after,
    }


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value else "never"


def rating_json(rating: Rating) -> dict[str, Any]:
    """One model rating of a lesson as a JSON-ready dict."""
    return {
        "score": rating.score,
        "pull_request": rating.pr_key,
        "ticket": rating.ticket_key,
        "model": rating.model,
        "prompt_version": rating.prompt_version,
        "reason": rating.reason,
        "rated_at": rating.rated_at,
    }


def rating_lines(summary: ratings.Summary) -> list[str]:
    """A lesson's ratings for `show`: count and mean, then the latest, one line each."""
    if not summary.count or summary.mean is None:
        return ["ratings:      none yet"]
    many = "rating" if summary.count == 1 else "ratings"
    lines = [f"ratings:      {summary.count} {many}, mean {summary.mean:+.2f}; latest:"]
    for rating in summary.latest:
        # A reason is the model's text: no terminal controls reach the screen.
        reason = " ".join(characters.visible(rating.reason or "").split()) or "-"
        lines.append(
            f"  {rating.score:+.2f}  {rating.pr_key}  {rating.model}  "
            f"{_when(rating.rated_at)}  {reason}"
        )
    return lines


def _report(change: Change, done: str) -> None:
    bullet = change.bullet
    if change.changed:
        click.echo(f"{bullet.id} {done}")
    else:
        click.echo(f"{bullet.id} is already {bullet.status}; nothing changed")


def _parse_as_of(value: str) -> datetime:
    try:
        parsed = clock.parse_time(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a date such as 2026-11-17 or an ISO time"
        ) from None
    # A bare date means "as the day ended", which is what people mean by "last Tuesday".
    if len(value.strip()) == 10:
        parsed = parsed.replace(hour=23, minute=59, second=59, microsecond=999999)
    return parsed


@click.command()
@click.argument("text")
@click.option("--learned-from", required=True, help="Ticket the lesson came from, e.g. CTMS-4337.")
@click.option("--tags", default="", help="Comma-separated tags.")
@click.option(
    "--scope", default="global", show_default=True, help="owner/repo, a Jira key, or global."
)
@click.option("--section", default="best_practice", show_default=True)
@click.option(
    "--status", type=click.Choice(["proposed", "active"]), default="active", show_default=True
)
@click.option("--source-url", default=None, help="Where the lesson was captured.")
@click.option(
    "--paths", default=None, help="Comma-separated repository globs it is about, e.g. orders/**."
)
@click.option("--symbols", default=None, help="Comma-separated function or class names.")
@click.option("--reason", default=None, help="Why it is being added (kept in the history).")
@pass_context
def add(
    ctx: Context,
    text: str,
    learned_from: str,
    tags: str,
    scope: str,
    section: str,
    status: str,
    source_url: str | None,
    paths: str | None,
    symbols: str | None,
    reason: str | None,
) -> None:
    """Add a lesson and print its id (or the id of the near-duplicate that already exists)."""
    with ctx.transaction() as session:
        result = lifecycle.add(
            session,
            text,
            learned_from=learned_from,
            actor=ctx.actor,
            tags=tags,
            scope=scope,
            section=section,
            status=status,
            source="cli",
            source_url=source_url,
            paths=paths,
            symbols=symbols,
            reason=reason,
            max_chars=ctx.settings.max_lesson_chars,
        )
    click.echo(result.bullet.id)
    if not result.created:
        note(
            f"note: nothing added; {result.bullet.id} already says this "
            f"({result.overlap:.0%} word overlap, scope {result.bullet.scope})"
        )
    elif result.similar is not None:
        similar = result.similar
        note(
            f"note: {result.bullet.id} is much like {similar.id} ({similar.overlap:.0%} word "
            f"overlap); if it replaces it: playbook-bot supersede {similar.id} "
            f"--by {result.bullet.id}"
        )


@click.command(name="list")
@click.option(
    "--status",
    type=click.Choice([*STATUSES, "all"]),
    default="active",
    show_default=True,
)
@click.option("--scope", default=None, help="Only this scope.")
@click.option("--as-of", "as_of", default=None, help="Show the playbook as it was at this time.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_context
def list_(ctx: Context, status: str, scope: str | None, as_of: str | None, as_json: bool) -> None:
    """List bullets."""
    wanted = None if status == "all" else status
    with ctx.transaction() as session:
        if as_of is not None:
            rows = [
                row
                for row in lifecycle.as_of(session, _parse_as_of(as_of))
                if wanted in (None, row["status"]) and scope in (None, row["scope"])
            ]
            rows.sort(key=lambda row: lifecycle.sort_key(row["id"]))
        else:
            rows = lifecycle.everything(session, status=wanted, scope=scope)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        note("no bullets match")
        return
    # The columns named once, as `search` names its own (--as-of has no counts to show).
    counts = "" if as_of else f"{'loads':>5} {'cites':>5}  "
    click.echo(f"{'id':<8} {'status':<10} {'scope':<16} {counts}lesson")
    for row in rows:
        counts = "" if as_of else f"{row['loads']:>5} {row['cites']:>5}  "
        text = textwrap.shorten(row["text"], width=70, placeholder="...")
        click.echo(f"{row['id']:<8} {row['status']:<10} {row['scope']:<16} {counts}{text}")


@click.command()
@click.argument("bullet_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_context
def show(ctx: Context, bullet_id: str, as_json: bool) -> None:
    """Show one bullet with its usage counters and history."""
    from bot.cli.experiment import describe_effect
    from playbook.experiment import report  # the effect: `show` alone reads it

    with ctx.transaction() as session:
        bullet = lifecycle.get(session, bullet_id)
        revisions = lifecycle.history(session, bullet_id)
        replaced = replacements.superseded_by_it(session, bullet.id)
        successor = replacements.chain(session, bullet)
        recent = usage.events_for(session, bullet_id, limit=10)
        effect = report.lesson_effect(
            session, bullet.id, min_tickets=ctx.settings.effect_min_tickets
        )
        rated = ratings.summary(session, bullet.id)
        latest = [rating_json(rating) for rating in rated.latest]
        lines = rating_lines(rated)
    if as_json:
        echo_json(
            lifecycle.as_dict(bullet)
            | {
                "supersedes": replaced,
                "history": [revision_json(r) for r in revisions],
                "recent_events": [
                    {
                        "event": e.kind,
                        "ticket": e.ticket_key,
                        "phase": e.phase,
                        "consumer": e.consumer,
                        "success": e.success,
                        "rank": e.rank,
                        "query_id": e.query_id,
                        "ts": e.ts,
                    }
                    for e in recent
                ],
                "effect": effect,
                "ratings": {"count": rated.count, "mean": rated.mean, "latest": latest},
            }
        )
        return
    click.echo(f"{bullet.id}  [{bullet.status}]  scope {bullet.scope}  section {bullet.section}")
    click.echo(textwrap.indent(textwrap.fill(bullet.text, 88), "  "))
    click.echo(f"learned from: {bullet.learned_from or '-'}   source: {bullet.source or '-'}")
    if bullet.source_url:
        click.echo(f"source url:   {bullet.source_url}")
    click.echo(f"tags:         {', '.join(bullet.tags) or '-'}")
    if bullet.paths or bullet.symbols:
        click.echo(f"paths:        {', '.join(bullet.paths or []) or '-'}")
        click.echo(f"symbols:      {', '.join(bullet.symbols or []) or '-'}")
    click.echo(f"created:      {_when(bullet.created_at)}   updated: {_when(bullet.updated_at)}")
    if successor:
        later = f" (now superseded by {' -> '.join(successor[1:])})" if successor[1:] else ""
        click.echo(f"superseded by {bullet.superseded_by}{later}: see `show {successor[-1]}`")
    if replaced:
        click.echo(f"supersedes:   {', '.join(replaced)}")
    if bullet.demoted_on:
        click.echo(f"demoted:      {_when(bullet.demoted_on)} ({escaped(bullet.demoted_reason)})")
    click.echo(
        f"usage:        {bullet.loads} loads, {bullet.cites} cites "
        f"({bullet.cites_success} in successful work, {bullet.cites_failure} in failed work); "
        f"last loaded {_when(bullet.last_loaded_at)}, last cited {_when(bullet.last_cited_at)}"
    )
    for line in lines:
        click.echo(line)
    click.echo(f"Measured effect: {describe_effect(effect)}")
    click.echo("history:")
    for revision in revisions:
        why = f": {escaped(revision.reason)}" if revision.reason else ""
        click.echo(
            f"  #{revision.id:<5} {_when(revision.at)}  {revision.action:<10} "
            f"by {escaped(revision.actor)}{why}"
        )


@click.command()
@click.argument("bullet_id")
@click.option("--text", default=None)
@click.option("--tags", default=None, help="Comma-separated tags (replaces the old ones).")
@click.option("--section", default=None)
@click.option("--scope", default=None)
@click.option("--learned-from", default=None)
@click.option("--source-url", default=None)
@click.option(
    "--paths", default=None, help="Comma-separated globs (replaces the old ones; '' clears)."
)
@click.option(
    "--symbols", default=None, help="Comma-separated names (replaces the old ones; '' clears)."
)
@click.option("--reason", default=None, help="Why (kept in the history).")
@pass_context
def edit(
    ctx: Context,
    bullet_id: str,
    text: str | None,
    tags: str | None,
    section: str | None,
    scope: str | None,
    learned_from: str | None,
    source_url: str | None,
    paths: str | None,
    symbols: str | None,
    reason: str | None,
) -> None:
    """Change a bullet's text, tags, section, scope, provenance or anchors."""
    changes = {
        "text": text,
        "tags": tags,
        "section": section,
        "scope": scope,
        "learned_from": learned_from,
        "source_url": source_url,
        "paths": paths,
        "symbols": symbols,
    }
    if all(value is None for value in changes.values()):
        raise click.UsageError("say what to change, e.g. --text or --tags")
    with ctx.transaction() as session:
        change = lifecycle.edit(
            session,
            bullet_id,
            actor=ctx.actor,
            reason=reason,
            max_chars=ctx.settings.max_lesson_chars,
            **changes,
        )
    click.echo(f"{bullet_id} edited" if change.changed else f"{bullet_id} unchanged")


@click.command()
@click.argument("bullet_id")
@click.option("--reason", required=True, help="Why it should no longer be shown.")
@pass_context
def deprecate(ctx: Context, bullet_id: str, reason: str) -> None:
    """Soft-deprecate a bullet (kept, not retrieved; `restore` undoes it)."""
    with ctx.transaction() as session:
        _report(
            lifecycle.deprecate(session, bullet_id, reason=reason, actor=ctx.actor), "deprecated"
        )


@click.command()
@click.argument("bullet_id")
@click.option("--reason", required=True, help="Why it is archived.")
@pass_context
def archive(ctx: Context, bullet_id: str, reason: str) -> None:
    """Archive a bullet (kept, not retrieved; `restore` undoes it)."""
    with ctx.transaction() as session:
        _report(lifecycle.archive(session, bullet_id, reason=reason, actor=ctx.actor), "archived")


@click.command()
@click.argument("bullet_id")
@click.option("--reason", default=None)
@pass_context
def restore(ctx: Context, bullet_id: str, reason: str | None) -> None:
    """Make a deprecated, archived or superseded bullet active again."""
    with ctx.transaction() as session:
        _report(lifecycle.restore(session, bullet_id, actor=ctx.actor, reason=reason), "restored")


@click.command()
@click.argument("bullet_id")
@click.option("--reason", default=None)
@pass_context
def approve(ctx: Context, bullet_id: str, reason: str | None) -> None:
    """Make a proposed bullet active."""
    with ctx.transaction() as session:
        _report(lifecycle.approve(session, bullet_id, actor=ctx.actor, reason=reason), "approved")


@click.command()
@click.argument("bullet_id")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def history(ctx: Context, bullet_id: str, as_json: bool) -> None:
    """Every change made to a bullet: who, when, why, before and after."""
    with ctx.transaction() as session:
        revisions = lifecycle.history(session, bullet_id)
    if as_json:
        echo_json([revision_json(r) for r in revisions])
        return
    for revision in revisions:
        click.echo(
            f"#{revision.id:<5} {_when(revision.at)}  {revision.action:<10} "
            f"by {escaped(revision.actor)}"
            + (f": {escaped(revision.reason)}" if revision.reason else "")
        )
        before, after = revision.before or {}, revision.after or {}
        for field in after:
            if before.get(field) != after.get(field) and revision.before is not None:
                click.echo(f"         {field}: {before.get(field)!r} -> {after.get(field)!r}")


class RevisionNumber(click.ParamType):
    """A revision id: ASCII digits only (click's int would read a full-width 1 as 1)."""

    name = "revision"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        """The number, or a usage error naming the argument."""
        number = value if isinstance(value, int) else ids.number(str(value).strip())
        if number is None:
            self.fail(f"{value!r} is not a revision number such as 12 (see `history`)", param, ctx)
        return number


@click.command()
@click.argument("bullet_id")
@click.argument("revision", type=RevisionNumber())
@click.option("--reason", default=None)
@pass_context
def revert(ctx: Context, bullet_id: str, revision: int, reason: str | None) -> None:
    """Undo one revision of a bullet (see `history`); the undo is itself a revision."""
    with ctx.transaction() as session:
        change = lifecycle.revert(session, bullet_id, revision, actor=ctx.actor, reason=reason)
    click.echo(f"{bullet_id} reverted" if change.changed else f"{bullet_id} unchanged")
