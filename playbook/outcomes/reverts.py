"""Reverted pull requests: linking a revert to the PR it undoes, and following reverts through.

A merged PR N is reverted while a merged revert M of it is in force: M names N (its body,
branch or commits; ``revert_signals``), M merged after N, M's merge was accepted (its
outcome applied, so its merger had write access) and M is not itself reverted. ``follow``
recomputes that from the stored PRs and moves what changed, so deliveries in any order, a
redelivery or a backfill end in the same playbook.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from playbook.experiment import outcomes as experiment_outcomes
from playbook.lessons import lifecycle
from playbook.models import Bullet, PullRequest
from playbook.outcomes import pull_reach, revert_signals, tracking, unreviewed, usage
from playbook.outcomes.evidence import ACTOR
from playbook.outcomes.pull_outcome import DEMOTED_REVERTED, LessonVerdict, Move
from playbook.outcomes.tracking import PullRequestState

# Reverts of reverts are followed this many steps at most: the merge-time order already rules
# out a cycle, this bounds the work whatever the stored rows say.
MAX_STEPS = 100


def demoted_reason(revert_key: str) -> str:
    """The ``demoted_reason`` of a lesson a revert demoted: ``reverted (owner/repo#M)``."""
    return f"{DEMOTED_REVERTED}{revert_key})"


def note(session: Session, seen: PullRequestState, body: str | None, *, news: bool) -> str | None:
    """Store the PR a delivery's body or branch says this PR reverts; returns what is stored.

    Only a PR of the same repository, and never the PR itself. A delivery older than what is
    stored does not change it, and a later one without a signal does not unlink it.
    """
    pull = session.get(PullRequest, seen.key)
    if pull is None:
        return None
    number = revert_signals.named_number(body, seen.head_ref, seen.repo)
    if news and number is not None and number != seen.number:
        pull.reverts = f"{pull.repo}#{number}"
        session.flush()
    return pull.reverts


def link_commits(session: Session, key: str, messages: Sequence[str | None]) -> str | None:
    """Link a PR to the merged PR of its repository whose head or merge commit it reverts.

    ``messages`` are the PR's commit messages; the first sha named that is a stored merged
    PR's head or merge commit links it. Returns what the PR reverts afterwards.
    """
    pull = session.get(PullRequest, key)
    if pull is None:
        return None
    if pull.reverts is not None:
        return pull.reverts
    for sha in revert_signals.in_commits(messages):
        target = by_commit(session, pull, sha)
        if target is not None:
            pull.reverts = target.key
            # Found at the merge, after the refresh that counted it as the ticket's merge.
            experiment_outcomes.refresh(session, tracking.tickets_of(session, key))
            session.flush()
            break
    return pull.reverts


def by_commit(session: Session, pull: PullRequest, sha: str) -> PullRequest | None:
    """The merged PR of ``pull``'s repository whose head or merge commit is ``sha``."""
    if len(sha) >= 40:
        named = or_(PullRequest.head_sha == sha, PullRequest.merge_commit_sha == sha)
    else:
        # An abbreviated sha (git revert --reference): only hex digits, so no LIKE wildcard.
        named = or_(
            PullRequest.head_sha.startswith(sha), PullRequest.merge_commit_sha.startswith(sha)
        )
    return session.scalars(
        select(PullRequest)
        .where(
            PullRequest.repo == pull.repo,
            PullRequest.key != pull.key,
            PullRequest.state == "merged",
            named,
        )
        .order_by(PullRequest.merged_at.desc(), PullRequest.key)
    ).first()


def accepted(pull: PullRequest) -> bool:
    """Whether a PR's merge was applied: a merged revert counts only then (its merger's access)."""
    return pull.state == "merged" and (pull.outcome_evidence or "").startswith("merged@")


def _merged_before(first: PullRequest, then: PullRequest) -> bool:
    # A revert undoes what was merged before it; without both times, the names decide.
    if first.merged_at is None or then.merged_at is None:
        return True
    return first.merged_at < then.merged_at


def in_force(session: Session, pull: PullRequest) -> PullRequest | None:
    """The merged revert of ``pull`` in force, if any: the first accepted one not reverted."""
    if pull.state != "merged":
        return None
    reverts = session.scalars(
        select(PullRequest)
        .where(
            PullRequest.reverts == pull.key,
            PullRequest.key != pull.key,
            PullRequest.reverted_by.is_(None),
        )
        .order_by(PullRequest.merged_at, PullRequest.key)
    )
    for revert in reverts:
        if accepted(revert) and _merged_before(pull, revert):
            return revert
    return None


@dataclass(frozen=True)
class RevertedLesson:
    """One lesson of a reverted PR when its revert comes or goes."""

    bullet_id: str
    status: str
    demoted_reason: str | None = None
    changed_by_hand: bool = False  # a person changed its status after the revert's evidence
    captured_here: bool = False  # from the reverted PR's own Lessons section
    alive: tuple[str, ...] = ()  # other PRs for its ticket that are open or merged in force
    # Captured from an author without write access, and no person approved it since.
    awaits_maintainer: bool = False


def judge_reverted(lesson: RevertedLesson) -> LessonVerdict:
    """What a revert does to a lesson of the PR it reverts: deprecate, unless outranked.

    A person's later change wins; a lesson learned from the ticket (not captured from this
    PR) stays while another PR for the ticket is open or merged, as for a closing.
    """
    if lesson.changed_by_hand:
        return LessonVerdict(lesson.bullet_id, Move.KEEP, "changed by hand after the revert")
    if lesson.alive and not lesson.captured_here:
        why = f"its ticket still has {', '.join(lesson.alive)}"
        return LessonVerdict(lesson.bullet_id, Move.KEEP, why)
    if lesson.status not in ("active", "proposed"):
        return LessonVerdict(lesson.bullet_id, Move.NONE)
    return LessonVerdict(lesson.bullet_id, Move.DEPRECATE)


def judge_unreverted(lesson: RevertedLesson, revert_key: str) -> LessonVerdict:
    """What undoing revert ``revert_key`` does to a lesson: restore it if that revert demoted it."""
    if lesson.status != "deprecated" or lesson.demoted_reason != demoted_reason(revert_key):
        return LessonVerdict(lesson.bullet_id, Move.NONE)
    if lesson.changed_by_hand:
        return LessonVerdict(lesson.bullet_id, Move.KEEP, "changed by hand after the revert")
    if lesson.awaits_maintainer:
        # Restoring makes it active: never for words no maintainer approved.
        return LessonVerdict(lesson.bullet_id, Move.KEEP, unreviewed.WAITS)
    return LessonVerdict(lesson.bullet_id, Move.RESTORE)


@dataclass
class RevertChange:
    """A PR whose revert came (``now`` names the revert) or went (``was`` names it)."""

    pull: str
    now: str | None
    was: str | None
    demoted: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    kept_because: dict[str, str] = field(default_factory=dict)
    settled: int = 0


def _lessons(
    session: Session, pull: PullRequest, since: datetime | None, bot: str
) -> list[RevertedLesson]:
    """The lessons a revert of ``pull`` moves: from its tickets, and from its Lessons section."""
    found: dict[str, RevertedLesson] = {}

    def add(bullet: Bullet, alive: tuple[str, ...]) -> None:
        # Another owner's lesson is not this PR's to move, whatever ticket names it.
        if bullet.id in found or not pull_reach.may_touch(pull.repo, bullet.scope):
            return
        by_hand = since is not None and tracking.changed_by_hand_since(
            session, bullet.id, since, bot
        )
        captured = bullet.source == "pr_body" and pull.url is not None
        found[bullet.id] = RevertedLesson(
            bullet_id=bullet.id,
            status=bullet.status,
            demoted_reason=bullet.demoted_reason,
            changed_by_hand=by_hand,
            captured_here=captured and bullet.source_url == pull.url,
            alive=alive,
            awaits_maintainer=bullet.status == "deprecated"
            and unreviewed.awaits_maintainer(session, bullet.id, bot),
        )

    if pull.url is not None:
        for bullet in session.scalars(
            select(Bullet).where(Bullet.source == "pr_body", Bullet.source_url == pull.url)
        ):
            add(bullet, ())
    for ticket in tracking.tickets_of(session, pull.key):
        others = [p for p in tracking.pulls_of(session, ticket) if p.key != pull.key]
        alive = tuple(p.key for p in others if tracking.alive(p))
        for bullet in tracking.learned_from(session, ticket):
            # A lesson captured from another PR's Lessons section follows that PR.
            if bullet.source == "pr_body" and bullet.source_url != pull.url:
                continue
            add(bullet, alive)
    return list(found.values())


def _evidence_at(session: Session, revert_key: str | None) -> datetime | None:
    revert = session.get(PullRequest, revert_key) if revert_key else None
    return revert.merged_at if revert is not None else None


def _move(session: Session, pull: PullRequest, now: PullRequest | None, bot: str) -> RevertChange:
    """Undo the revert of ``pull`` stored, then apply ``now``'s; record it on ``pull``."""
    was = pull.reverted_by
    change = RevertChange(pull.key, now.key if now is not None else None, was)
    # A revert PR's tickets are the reverted PR's: its own lessons are not its to move.
    moves_lessons = pull.reverts is None
    if was is not None and moves_lessons:
        old = session.get(PullRequest, was)
        # Undone because the revert was reverted in turn: that merge is the evidence.
        undone_by = old.reverted_by if old is not None else None
        since = _evidence_at(session, undone_by) or _evidence_at(session, was)
        actor = f"{bot} ({undone_by or 'a revert'} reverted {was})"
        reason = f"{was}, which reverted {pull.key}, was reverted by {undone_by or 'a revert'}"
        for lesson in _lessons(session, pull, since, bot):
            verdict = judge_unreverted(lesson, was)
            if verdict.move is Move.KEEP and verdict.why is not None:
                change.kept_because[lesson.bullet_id] = verdict.why
            elif verdict.move is Move.RESTORE:
                lifecycle.restore(session, lesson.bullet_id, actor=actor, reason=reason)
                change.restored.append(lesson.bullet_id)
    if now is not None and moves_lessons:
        reason = demoted_reason(now.key)
        actor = f"{bot} ({now.key} reverted {pull.key})"
        for lesson in _lessons(session, pull, now.merged_at, bot):
            verdict = judge_reverted(lesson)
            if verdict.move is Move.KEEP and verdict.why is not None:
                change.kept_because[lesson.bullet_id] = verdict.why
            elif verdict.move is Move.DEPRECATE:
                moved = lifecycle.deprecate(
                    session,
                    lesson.bullet_id,
                    reason=reason,
                    actor=actor,
                    note=f"{reason}: {now.key} reverted {pull.key}",
                )
                if moved.changed:
                    change.demoted.append(lesson.bullet_id)
    pull.reverted_by = change.now
    # A reverted PR's cites helped build what the team undid: they count as failures.
    change.settled = usage.settle(
        session, pull_reach.cites_in(session, pull.key), pull.state == "merged" and now is None
    )
    experiment_outcomes.refresh(session, tracking.tickets_of(session, pull.key))
    session.flush()
    return change


def follow(session: Session, key: str, *, bot: str = ACTOR) -> list[RevertChange]:
    """Bring the reverts around PR ``key`` in line with the stored PRs; what changed, in order.

    Call it in the transaction that applied the PR's outcome: the PR may have a revert that
    was waiting for it to be known as merged, and it may revert another (or no longer do so,
    being reverted itself), which may in turn restore what that one's revert had demoted.
    """
    start = session.get(PullRequest, key)
    if start is None:
        return []
    queue = [start]
    changes = []
    for _ in range(MAX_STEPS):
        if not queue:
            break
        pull = queue.pop(0)
        if pull.reverts is not None:
            target = session.get(PullRequest, pull.reverts)
            if target is not None and target.key != pull.key:
                queue.append(target)
        now = in_force(session, pull)
        if (now.key if now is not None else None) != pull.reverted_by:
            changes.append(_move(session, pull, now, bot))
    return changes
