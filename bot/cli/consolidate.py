"""`consolidate` and `consolidations`: proposals that merge a scope's overlapping lessons."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import click

from bot.cli.base import Context, UserError, echo_json, pass_context

# Ids are BIGINT in both databases: a larger number cannot name a row.
MAX_ID = 2**63 - 1
STATUSES = ("open", "accepted", "rejected", "undone", "stale")
# The width of each column of `consolidations show`: members on the left, the draft on the right.
COLUMN = 48
# A --text-file is a lesson, not a document: anything bigger is the wrong file.
MAX_FILE_BYTES = 64 * 1024


def size_line(scope: dict[str, Any]) -> str:
    """``acme/api: 6,420 / 8,000 chars (80%), 14 lessons``."""
    lessons = scope["lessons"]
    return (
        f"{scope['scope']}: {scope['chars']:,} / {scope['budget']:,} chars "
        f"({scope['share']:.0%}), {lessons} lesson{'' if lessons == 1 else 's'}"
    )


def _members(proposal: dict[str, Any]) -> list[str]:
    return [str(m) for m in proposal.get("member_ids") or []]


def proposal_line(proposal: dict[str, Any]) -> str:
    """``#3 pb-4 + pb-9 + pb-12: saves 412 chars, draft longest member``."""
    number = f"#{proposal['id']}" if proposal.get("id") is not None else "(not stored)"
    draft = _draft_source(proposal)
    flagged = proposal.get("dropped_terms") or {}
    flag = f", key terms dropped from {', '.join(sorted(flagged))}" if flagged else ""
    return (
        f"{number} {' + '.join(_members(proposal))}: saves {proposal.get('saves_chars', 0):,} "
        f"chars, draft {draft}{flag}"
    )


def _draft_source(proposal: dict[str, Any]) -> str:
    source = proposal.get("draft_source") or "longest"
    if source == "longest":
        return "longest member"
    if source == "model":
        return f"by the model {proposal.get('model') or ''}".rstrip()
    return str(source)


def consolidation_id(value: str) -> int:
    """A consolidation id from the command line; UserError naming it when it is not one."""
    text = value.strip().removeprefix("#")
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_ID:
        raise UserError(f"consolidation id must be a positive number such as 3, not {value!r}")
    return int(text)


@click.command()
@click.option("--scope", default=None, help="Consolidate this scope, whatever its size.")
@click.option("--dry-run", is_flag=True, help="Show the proposals; store and queue nothing.")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def consolidate(ctx: Context, scope: str | None, dry_run: bool, as_json: bool) -> None:
    """Propose merging overlapping lessons in scopes past 75% of their context budget.

    Each scope's size is the characters of its active lessons, against its budget
    (PLAYBOOK_CONTEXT_BUDGET, or the smallest `context_budget` of the repositories that use the
    scope). With --scope, that scope is consolidated whatever its size. Each proposal's draft
    is its longest member; with a model set, the model worker writes a merged draft. Nothing
    changes a lesson until a maintainer accepts (`consolidations accept`).
    """
    from bot import consolidate as runs
    from bot.services import Services

    if scope is not None and not scope.strip():
        raise UserError("--scope is empty; name a scope such as acme/api or global")
    services = Services(engine=ctx.engine, settings=ctx.settings)
    report = runs.run(services, scope=scope.strip() if scope else None, dry_run=dry_run)
    if as_json:
        echo_json(report.as_dict())
        return
    if not report.scopes:
        click.echo("no scope has active lessons")
    for run in report.scopes:
        shown = run.as_dict()
        if run.skipped:
            click.echo(f"{size_line(shown)}: {run.skipped}, skipped")
            continue
        verb = "would propose" if dry_run else "proposed"
        count = len(run.proposals)
        groups = f"{run.groups} group{'' if run.groups == 1 else 's'} of overlapping lessons"
        again = f", {run.already} already proposed, rejected or undone" if run.already else ""
        click.echo(f"{size_line(shown)}: {groups}{again}, {verb} {count}")
        for proposal in run.proposals:
            click.echo(f"  {proposal_line(proposal)}")
        if run.queued:
            click.echo(
                f"  {run.queued} merge job{'' if run.queued == 1 else 's'} queued: the "
                "model worker writes their drafts (`playbook-bot worker` or `serve`)"
            )
    if dry_run:
        click.echo("dry run: nothing was stored")


@click.group("consolidations")
def consolidations_group() -> None:
    """Review consolidation proposals: list, show, accept (maybe edited), reject, undo."""


@consolidations_group.command("list")
@click.option("--status", type=click.Choice(STATUSES), default=None)
@click.option("--scope", default=None)
@click.option("--limit", type=click.IntRange(1, 500), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@pass_context
def list_(ctx: Context, status: str | None, scope: str | None, limit: int, as_json: bool) -> None:
    """List consolidation proposals, newest first."""
    from playbook.consolidation import store

    with ctx.transaction() as session:
        rows = [
            store.as_dict(c, members=False)
            for c in store.listing(session, status=status, scope=scope, limit=limit)
        ]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no consolidation proposals" + (f" {status}" if status else ""))
    for row in rows:
        click.echo(f"{row.get('status', ''):<9} {row.get('scope', '')}  {proposal_line(row)}")


@consolidations_group.command("show")
@click.argument("consolidation")
@click.option("--json", "as_json", is_flag=True)
@pass_context
def show(ctx: Context, consolidation: str, as_json: bool) -> None:
    """Show a proposal: its members beside the draft, and each member's key terms it drops."""
    from playbook.consolidation import store

    number = consolidation_id(consolidation)
    with ctx.transaction() as session:
        shown = store.as_dict(store.get(session, number), members=True)
    if as_json:
        echo_json(shown)
        return
    click.echo(f"consolidation #{number}: {shown.get('status')} in {shown.get('scope')}")
    click.echo(proposal_line(shown))
    decided = shown.get("decided_by")
    if decided:
        why = f": {shown['reason']}" if shown.get("reason") else ""
        click.echo(f"{shown.get('status')} by {decided}{why}")
    if shown.get("merged_id"):
        click.echo(f"merged lesson: {shown['merged_id']}")
    click.echo("")
    click.echo(side_by_side(_member_texts(shown), str(shown.get("draft") or "")))
    dropped = shown.get("dropped_terms") or {}
    if dropped:
        click.echo("")
        click.echo("key terms of a member the draft drops (check before accepting):")
        for member, terms in sorted(dropped.items()):
            click.echo(f"  {member}: {', '.join(terms)}")


def _member_texts(shown: dict[str, Any]) -> list[tuple[str, str]]:
    members = shown.get("members") or []
    texts: list[tuple[str, str]] = []
    for member in members:
        if isinstance(member, dict):
            texts.append((str(member.get("id")), str(member.get("text") or "")))
    return texts or [(member, "") for member in _members(shown)]


def side_by_side(members: list[tuple[str, str]], draft: str) -> str:
    """The members' texts in the left column, the draft in the right, each wrapped."""
    left: list[str] = []
    for member_id, text in members:
        left.append(f"[{member_id}] ({len(text):,} chars)")
        left.extend([*_wrapped(text), ""])
    left = left[:-1]  # no blank row after the last member
    right = [f"[draft] ({len(draft):,} chars)", *_wrapped(draft)]
    rows = [f"{'members':<{COLUMN}} | draft", f"{'-' * COLUMN}-+-{'-' * COLUMN}"]
    for index in range(max(len(left), len(right))):
        one = left[index] if index < len(left) else ""
        two = right[index] if index < len(right) else ""
        rows.append(f"{one:<{COLUMN}} | {two}".rstrip())
    return "\n".join(rows)


def _wrapped(text: str) -> list[str]:
    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        lines.extend(textwrap.wrap(paragraph, COLUMN, break_long_words=True) or [""])
    return lines


def _text_of(text: str | None, text_file: str | None) -> str | None:
    if text is not None and text_file is not None:
        raise UserError("give --text or --text-file, not both")
    if text_file is None:
        return text
    try:
        with Path(text_file).open("rb") as handle:
            content = handle.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise UserError(f"--text-file {text_file}: {error.strerror or error}") from None
    if len(content) > MAX_FILE_BYTES:
        raise UserError(f"--text-file {text_file} is over {MAX_FILE_BYTES:,} bytes")
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"--text-file {text_file} is not UTF-8 text") from None


@consolidations_group.command("accept")
@click.argument("consolidation")
@click.option("--text", default=None, help="The merged lesson's text, edited (default: the draft).")
@click.option("--text-file", default=None, help="Read the edited text from this file.")
@click.option("--reason", default=None, help="Why (kept in the lessons' history).")
@pass_context
def accept(
    ctx: Context, consolidation: str, text: str | None, text_file: str | None, reason: str | None
) -> None:
    """Accept a proposal: the merged lesson becomes active and supersedes each member."""
    from playbook.consolidation import store

    number = consolidation_id(consolidation)
    merged_text = _text_of(text, text_file)
    with ctx.transaction() as session:
        done = store.accept(
            session,
            number,
            actor=ctx.actor,
            text=merged_text,
            reason=reason,
            max_chars=ctx.settings.max_lesson_chars,
        )
        shown = store.as_dict(done, members=False)
    click.echo(
        f"consolidation #{number} accepted: {shown.get('merged_id')} is active and supersedes "
        f"{', '.join(_members(shown))}"
    )


@consolidations_group.command("reject")
@click.argument("consolidation")
@click.option("--reason", default=None, help="Why (kept with the proposal).")
@pass_context
def reject(ctx: Context, consolidation: str, reason: str | None) -> None:
    """Reject a proposal: its group is not proposed again unless a member changes."""
    from playbook.consolidation import store

    number = consolidation_id(consolidation)
    with ctx.transaction() as session:
        store.reject(session, number, actor=ctx.actor, reason=reason)
    click.echo(f"consolidation #{number} rejected")


@consolidations_group.command("undo")
@click.argument("consolidation")
@click.option("--reason", default=None, help="Why (kept in the lessons' history).")
@pass_context
def undo(ctx: Context, consolidation: str, reason: str | None) -> None:
    """Undo an accepted proposal: its members are active again, the merged lesson archived."""
    from playbook.consolidation import store

    number = consolidation_id(consolidation)
    with ctx.transaction() as session:
        done = store.undo(session, number, actor=ctx.actor, reason=reason)
        shown = store.as_dict(done, members=False)
    click.echo(
        f"consolidation #{number} undone: {', '.join(_members(shown))} active again, "
        f"{shown.get('merged_id')} archived"
    )
