"""The rule-file sync of each repository: its PR, the block last committed, and its pause."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook import clock
from playbook.anchors.detail import files_gone
from playbook.models import Bullet, RuleFileSync
from playbook.scopes import View

# The one branch the bot commits the block to, and opens its one sync PR from.
BRANCH = "playbook-bot/agents-md"
# Why a lesson left the block when the repository cannot see it: gone, or another scope's.
GONE = "no longer in the playbook"


@dataclass(frozen=True)
class SyncState:
    """A repository's sync as stored, usable after the session ends."""

    repo: str
    path: str
    pull_number: int | None
    pull_url: str | None
    block_sha: str | None
    lesson_ids: list[str]
    paused_until: datetime | None
    paused_reason: str | None
    synced_at: datetime | None
    last_result: str | None
    # The path-scoped rule files the bot wrote (path -> sha256 of their text): only these may
    # it ever delete.
    files: dict[str, str]


@dataclass(frozen=True)
class Pause:
    """Why and until when a repository's sync waits."""

    until: datetime
    reason: str


def _state(row: RuleFileSync) -> SyncState:
    return SyncState(
        repo=row.repo,
        path=row.path,
        pull_number=row.pull_number,
        pull_url=row.pull_url,
        block_sha=row.block_sha,
        lesson_ids=list(row.lesson_ids or []),
        paused_until=clock.to_utc(row.paused_until) if row.paused_until else None,
        paused_reason=row.paused_reason,
        synced_at=clock.to_utc(row.synced_at) if row.synced_at else None,
        last_result=row.last_result,
        files=dict(row.files) if isinstance(row.files, dict) else {},
    )


def _row(session: Session, repo: str, path: str) -> RuleFileSync:
    """The repository's row, created (for ``path``) the first time, locked for the update."""
    row = session.get(RuleFileSync, repo, with_for_update=True)
    if row is None:
        row = RuleFileSync(repo=repo, path=path, lesson_ids=[])
        session.add(row)
    return row


def get(session: Session, repo: str) -> SyncState | None:
    """What is stored about ``repo``'s sync, or None if it never ran."""
    row = session.get(RuleFileSync, repo)
    return _state(row) if row is not None else None


def every(session: Session) -> list[SyncState]:
    """Every repository's sync, by name."""
    rows = session.scalars(select(RuleFileSync).order_by(RuleFileSync.repo))
    return [_state(row) for row in rows]


def record(
    session: Session,
    repo: str,
    *,
    path: str,
    result: str,
    pull_number: int | None = None,
    pull_url: str | None = None,
    block_sha: str | None = None,
    lesson_ids: Sequence[str] | None = None,
    files: dict[str, str] | None = None,
) -> None:
    """Store what a sync did: its one-line result and, when given, the PR, the block and the
    path-scoped files it keeps."""
    row = _row(session, repo, path)
    row.path = path
    row.last_result = result
    row.synced_at = clock.now()
    if pull_number is not None:
        row.pull_number, row.pull_url = pull_number, pull_url
    if block_sha is not None:
        row.block_sha = block_sha
    if lesson_ids is not None:
        row.lesson_ids = list(lesson_ids)
    if files is not None:
        row.files = dict(files)


def note(session: Session, repo: str, path: str, result: str) -> None:
    """Keep only a sync's one-line result (it changed nothing, or failed)."""
    row = _row(session, repo, path)
    row.last_result = result


def pause(
    session: Session,
    repo: str,
    path: str,
    until: datetime,
    reason: str,
    *,
    pull_number: int | None = None,
    pull_url: str | None = None,
) -> None:
    """No sync of ``repo`` before ``until``, for ``reason`` (the closed PR ``pull_number``)."""
    row = _row(session, repo, path)
    row.paused_until, row.paused_reason = until, reason
    if pull_number is not None:
        row.pull_number, row.pull_url = pull_number, pull_url
    row.last_result = f"paused until {until:%Y-%m-%d}: {reason}"


def paused(session: Session, repo: str, now: datetime | None = None) -> Pause | None:
    """The pause in force on ``repo``'s sync, or None."""
    row = session.get(RuleFileSync, repo)
    if row is None or row.paused_until is None:
        return None
    until = clock.to_utc(row.paused_until)
    if until <= (now or clock.now()):
        return None
    return Pause(until, row.paused_reason or "paused")


def expired(session: Session, repo: str, now: datetime | None = None) -> bool:
    """Whether ``repo`` has a pause whose time is over (the next sync clears it)."""
    row = session.get(RuleFileSync, repo)
    if row is None or row.paused_until is None:
        return False
    return clock.to_utc(row.paused_until) <= (now or clock.now())


def resume(session: Session, repo: str, result: str = "resumed") -> bool:
    """Lift ``repo``'s pause; its closed PR is forgotten, so the next sync opens a new one.

    Returns whether there was a pause to lift.
    """
    row = session.get(RuleFileSync, repo, with_for_update=True)
    if row is None or row.paused_until is None:
        return False
    row.paused_until = row.paused_reason = None
    row.pull_number = row.pull_url = None
    row.last_result = result
    return True


def merged(session: Session, repo: str, path: str, number: int, url: str | None) -> None:
    """The sync PR was merged: its block is the file's now, and any pause is over."""
    row = _row(session, repo, path)
    row.pull_number, row.pull_url = number, url
    row.paused_until = row.paused_reason = None
    row.last_result = f"PR #{number} merged"


def reopened(session: Session, repo: str, number: int) -> bool:
    """A person reopened the sync PR they had closed: the pause it caused is lifted."""
    row = session.get(RuleFileSync, repo, with_for_update=True)
    if row is None or row.paused_until is None or row.pull_number != number:
        return False
    row.paused_until = row.paused_reason = None
    row.last_result = f"PR #{number} reopened: sync resumed"
    return True


def is_sync_number(session: Session, repo: str, number: int) -> bool:
    """Whether PR ``number`` of ``repo`` is the bot's sync PR as last recorded."""
    found = session.scalar(select(RuleFileSync.pull_number).where(RuleFileSync.repo == repo))
    return found is not None and found == number


def why_removed(session: Session, ids: Sequence[str], view: View) -> dict[str, str]:
    """Why each lesson id left the block, told only of what ``view`` (the repository) sees.

    The sync PR is public and the ids come from the file, which anyone can edit: a lesson of
    another scope reads exactly as one that does not exist ("no longer in the playbook"),
    with no status, reason, scope or replacement. A visible lesson says it was demoted (and
    the reason given), superseded (by its replacement only when that one is visible too), or
    outranked.
    """
    reasons = dict.fromkeys(ids, GONE)
    if not ids:
        return reasons
    rows = session.execute(
        select(
            Bullet.id,
            Bullet.status,
            Bullet.demoted_reason,
            Bullet.superseded_by,
            Bullet.stale_detail,
        ).where(Bullet.id.in_(list(ids)), view.lessons())
    ).all()
    replacements = {row.superseded_by for row in rows if row.superseded_by}
    shown = set(
        session.scalars(select(Bullet.id).where(Bullet.id.in_(list(replacements)), view.lessons()))
        if replacements
        else ()
    )
    for bullet_id, status, demoted_reason, superseded_by, stale_detail in rows:
        reason = (demoted_reason or "").strip()
        gone = files_gone(stale_detail) if status == "active" else None
        if gone:
            # Short: the PR's table cuts a long reason.
            reasons[bullet_id] = f"its files were removed in {gone}; out until a maintainer looks"
        elif status == "superseded" and superseded_by:
            if superseded_by not in shown:
                # Its replacement (and the reason, which names it by default) is another scope's.
                reasons[bullet_id] = "superseded"
                continue
            # Its replacement is what a reader of the block wants next.
            named = f"superseded by {superseded_by}"
            reasons[bullet_id] = named + (f": {reason}" if reason and reason != named else "")
        elif status != "active":
            reasons[bullet_id] = f"{status}: {reason}" if reason else status
        else:
            reasons[bullet_id] = "fell below the budget: lower-ranked than the lessons shown"
    return reasons
