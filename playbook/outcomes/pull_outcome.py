"""The pull-request outcome rule: one pure decision over gathered facts, one idempotent apply."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum

from sqlalchemy.orm import Session

from playbook.lessons import demotions, lifecycle
from playbook.models import PullRequest
from playbook.outcomes import pull_reach, tracking, unreviewed, usage
from playbook.outcomes.demote_policy import DemotePolicy
from playbook.outcomes.evidence import ACTOR
from playbook.outcomes.tracking import PullRequestState
from playbook.reviews.proposals import SOURCE as REVIEW_SOURCE

# Why the bot soft-deprecated a lesson: a PR for its ticket closed unmerged, or its PR was
# reverted (``reverted (owner/repo#M)``); both come back when a later PR for the ticket merges.
DEMOTED_UNMERGED = demotions.UNMERGED
DEMOTED_REVERTED = demotions.REVERTED


class Access(StrEnum):
    """What GitHub says about the closer's access to the repository."""

    WRITE = "write"
    NONE = "none"
    UNKNOWN = "unknown"  # GitHub is not configured, so it cannot be asked


class Need(StrEnum):
    """A fact the decision cannot do without, gathered only when it is needed."""

    ACCESS = "access"  # the closer's access to the repository (one API call)
    TICKET_FLAG = "ticket_flag"  # whether a linked ticket is flagged (one call per ticket)


class Step(StrEnum):
    """What to do with a PR's news."""

    WAIT = "wait"  # open, or an older delivery: no outcome yet
    APPLIED = "applied"  # this closing was applied already
    ASK = "ask"  # gather ``Verdict.need`` and decide again
    IGNORED = "ignored"  # the closing does not count; ``Verdict.reason`` says why
    APPLY = "apply"  # apply the outcome (``apply``)


@dataclass(frozen=True)
class Closer:
    """Who closed a PR, and who opened it: a closed PR's outcome depends on the closer."""

    login: str | None
    is_bot: bool = False
    opener: str | None = None


@dataclass(frozen=True)
class PullFacts:
    """Everything the outcome of a PR's news depends on; facts not gathered yet are None."""

    seen: PullRequestState
    news: bool  # the delivery is newer than what was stored (tracking.observe)
    applied: str | None = None  # the outcome key applied already, if any
    closer: Closer = Closer(None)
    agents: frozenset[str] = frozenset()  # PLAYBOOK_AGENT_LOGINS
    policy: DemotePolicy = DemotePolicy.ALWAYS
    labels: tuple[str, ...] = ()
    review_label: str = "needs-human-review"
    access: Access | None = None
    ticket_flagged: bool | None = None
    bot: str = ACTOR
    # The PR this one reverts (owner/repo#n), when a signal names one: its merge then needs
    # a merger with write access, as a closing does (``closer`` is then who merged it).
    reverts: str | None = None  # who the bot is: its own revisions are not a person's decision


@dataclass(frozen=True)
class Verdict:
    """What ``decide`` made of a PR's facts."""

    step: Step
    seen: PullRequestState
    key: str  # the outcome key, ``closed@<time>`` or ``merged@<time>``
    need: Need | None = None
    reason: str | None = None
    demote: bool = False
    bot: str = ACTOR

    @property
    def actor(self) -> str:
        """The actor of the revisions this outcome makes."""
        return f"{self.bot} ({self.seen.key} {self.seen.state})"

    @property
    def evidence_at(self) -> datetime | None:
        """When the outcome happened: a person's later change to a lesson outranks it."""
        return self.seen.merged_at or self.seen.closed_at


def outcome_key(seen: PullRequestState) -> str:
    """The outcome a payload shows, as a key: the same closing seen again is the same key."""
    at = seen.merged_at or seen.closed_at or seen.updated_at
    return f"{seen.state}@{at.isoformat() if at else '?'}"


def closer_refusal(facts: PullFacts) -> str | Need | None:
    """Why the person who closed a PR unmerged may not demote lessons, None if they may.

    Anyone who can open a PR (read access, a fork) can close their own PR: that says
    nothing about the lessons. Closing counts when the closer has write access to the
    repository, or is the agent that opened the PR (an App's bot, or a login listed in
    PLAYBOOK_AGENT_LOGINS). Returns Need.ACCESS while the access is not known.
    """
    login = facts.closer.login
    if not login:
        return f"who {'merged' if facts.seen.state == 'merged' else 'closed'} it is unknown"
    own = login == facts.closer.opener
    if own and (facts.closer.is_bot or login.lower() in {a.lower() for a in facts.agents}):
        return None
    repo = facts.seen.repo
    if facts.access is None:
        return Need.ACCESS
    if facts.access is Access.UNKNOWN:
        return f"GitHub is not configured, so {login}'s access to {repo} cannot be checked"
    if facts.access is Access.NONE:
        return f"{login} has no write access to {repo}"
    return None


def labelled(labels: tuple[str, ...], review_label: str) -> bool:
    """Whether the PR itself carries the human-review label (case-insensitive, as GitHub)."""
    return any(name.lower() == review_label.lower() for name in labels)


def decide(facts: PullFacts) -> Verdict:
    """The outcome of a PR's news: wait, applied already, ask for a fact, ignored, or apply.

    Facts that need an outside call (the closer's access, the tickets' review flags) are
    asked for one at a time, in that order, and only when the answer matters.
    """
    seen = facts.seen
    verdict = Verdict(Step.WAIT, seen, outcome_key(seen), bot=facts.bot)
    if seen.state == "open" or not facts.news:
        return verdict
    if facts.applied == verdict.key:
        return replace(verdict, step=Step.APPLIED)
    merged = seen.state == "merged"
    # A merge needs no one's say, except a revert's: it undoes another PR's outcome.
    if not merged or facts.reverts is not None:
        refused = closer_refusal(facts)
        if isinstance(refused, Need):
            return replace(verdict, step=Step.ASK, need=refused)
        if refused is not None:
            what = f"reverts {facts.reverts}" if merged else "closed without merge"
            why = f"{seen.key} {what}, but {refused}; outcome not applied"
            return replace(verdict, step=Step.IGNORED, reason=why)
    if facts.policy is DemotePolicy.ALWAYS:
        demote = True
    elif merged:
        demote = False
    elif labelled(facts.labels, facts.review_label):
        demote = True
    elif facts.ticket_flagged is None:
        return replace(verdict, step=Step.ASK, need=Need.TICKET_FLAG)
    else:
        demote = facts.ticket_flagged
    return replace(verdict, step=Step.APPLY, demote=demote)


class Move(StrEnum):
    """What an outcome does to one lesson."""

    APPROVE = "approve"
    RESTORE = "restore"
    DEPRECATE = "deprecate"
    KEEP = "keep"  # would move, but something outranks this outcome (``LessonVerdict.why``)
    NONE = "none"


@dataclass(frozen=True)
class LessonFacts:
    """What one lesson learned from a PR's ticket looks like when the outcome arrives."""

    bullet_id: str
    ticket: str
    status: str
    demoted_reason: str | None = None
    changed_by_hand: bool = False  # a person changed its status after the closing
    own_pull: tuple[str, str] | None = None  # (key, state) of another PR it was captured from
    alive: tuple[str, ...] = ()  # other PRs for the ticket that are open or merged
    from_review: bool = False  # proposed from review feedback: only a maintainer decides
    # Captured from an author without write access, and no person approved it since.
    awaits_maintainer: bool = False


@dataclass(frozen=True)
class LessonVerdict:
    """The move for one lesson, and why it is kept when it is."""

    bullet_id: str
    move: Move
    why: str | None = None


def judge(lesson: LessonFacts, merged: bool, demote: bool) -> LessonVerdict:
    """What a PR's outcome does to one lesson learned from its tickets.

    Merged: a proposed lesson becomes active, one demoted because an earlier PR for the
    ticket closed unmerged, or was reverted, comes back. Closed unmerged (with ``demote``):
    unless another PR for the ticket is open or merged (and not reverted), an active or
    proposed lesson is soft-deprecated.
    A person's later change wins, and a lesson captured from another PR's Lessons section
    follows that PR, not this one. No outcome activates a lesson that awaits a maintainer.
    """
    if lesson.changed_by_hand:
        return LessonVerdict(lesson.bullet_id, Move.KEEP, "changed by hand after this outcome")
    if lesson.from_review and lesson.status == "proposed":
        # A reviewer's rule is no claim of the agent's work: no later PR approves or demotes it.
        return LessonVerdict(lesson.bullet_id, Move.NONE)
    if merged and lesson.own_pull is not None and lesson.own_pull[1] != "merged":
        key, state = lesson.own_pull
        return LessonVerdict(lesson.bullet_id, Move.KEEP, f"its own PR {key} is {state}")
    if merged:
        reason = lesson.demoted_reason or ""
        restorable = lesson.status == "deprecated" and (
            reason == DEMOTED_UNMERGED or reason.startswith(DEMOTED_REVERTED)
        )
        if (lesson.status == "proposed" or restorable) and lesson.awaits_maintainer:
            return LessonVerdict(lesson.bullet_id, Move.KEEP, unreviewed.WAITS)
        if lesson.status == "proposed":
            return LessonVerdict(lesson.bullet_id, Move.APPROVE)
        if restorable:
            return LessonVerdict(lesson.bullet_id, Move.RESTORE)
        return LessonVerdict(lesson.bullet_id, Move.NONE)
    if lesson.alive:
        why = f"{lesson.ticket} still has {', '.join(lesson.alive)}"
        return LessonVerdict(lesson.bullet_id, Move.KEEP, why)
    if not demote or lesson.status not in ("active", "proposed"):
        return LessonVerdict(lesson.bullet_id, Move.NONE)
    return LessonVerdict(lesson.bullet_id, Move.DEPRECATE)


@dataclass
class Outcome:
    """What a PR's outcome changed in the playbook."""

    demoted: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    approved: list[str] = field(default_factory=list)
    settled: int = 0
    kept_because: dict[str, str] = field(default_factory=dict)


def settle(
    session: Session,
    pull: PullRequest,
    *,
    bot: str = ACTOR,
    actor: str | None = None,
    demote: bool = True,
    evidence_at: datetime | None = None,
) -> Outcome:
    """Move the lessons learned from a closed PR's tickets (``judge``) and rate its cites.

    ``bot`` is the bot's identity, so its own revisions do not count as a person's change
    after ``evidence_at``; ``actor`` (by default ``bot``) is recorded on the revisions.
    Without ``evidence_at`` no change by hand is looked for.
    """
    actor = actor or bot
    outcome = Outcome()
    merged = pull.state == "merged"
    reason = f"{pull.key} {'merged' if merged else 'closed without merge'}"
    # A revert's tickets are the reverted PR's (its title quotes it): its own outcome moves
    # none of their lessons; a reverted PR's are moved by its revert (``reverts.follow``).
    tickets = [] if pull.reverts or pull.reverted_by else tracking.tickets_of(session, pull.key)
    for ticket in tickets:
        others = [p for p in tracking.pulls_of(session, ticket) if p.key != pull.key]
        alive = tuple(p.key for p in others if tracking.alive(p))
        for bullet in tracking.learned_from(session, ticket):
            if not pull_reach.may_touch(pull.repo, bullet.scope):
                # A Jira ticket is anyone's to name: its lessons of another owner's
                # repository are not this PR's to approve or demote.
                continue
            by_hand = evidence_at is not None and tracking.changed_by_hand_since(
                session, bullet.id, evidence_at, bot
            )
            source = tracking.source_pull(session, bullet, pull) if merged else None
            lesson = LessonFacts(
                bullet_id=bullet.id,
                ticket=ticket,
                status=bullet.status,
                demoted_reason=bullet.demoted_reason,
                changed_by_hand=by_hand,
                own_pull=(source.key, _state(source)) if source is not None else None,
                alive=alive,
                from_review=(bullet.source or "").startswith(REVIEW_SOURCE),
                awaits_maintainer=merged
                and bullet.status != "active"
                and unreviewed.awaits_maintainer(session, bullet.id, bot),
            )
            verdict = judge(lesson, merged, demote)
            if verdict.move is Move.KEEP and verdict.why is not None:
                outcome.kept_because[bullet.id] = verdict.why
            elif verdict.move is Move.APPROVE:
                lifecycle.approve(session, bullet.id, actor=actor, reason=reason)
                outcome.approved.append(bullet.id)
            elif verdict.move is Move.RESTORE:
                lifecycle.restore(session, bullet.id, actor=actor, reason=reason)
                outcome.restored.append(bullet.id)
            elif verdict.move is Move.DEPRECATE:
                change = lifecycle.deprecate(
                    session,
                    bullet.id,
                    reason=DEMOTED_UNMERGED,
                    actor=actor,
                    note=f"{DEMOTED_UNMERGED}: {reason}",
                )
                if change.changed:
                    outcome.demoted.append(bullet.id)
    success = merged and pull.reverted_by is None
    outcome.settled = usage.settle(session, pull_reach.cites_in(session, pull.key), success)
    session.flush()
    return outcome


def _state(pull: PullRequest) -> str:
    # A reverted PR merged, but what it brought was undone: it vouches for nothing.
    return "reverted" if pull.reverted_by else pull.state


def apply(session: Session, verdict: Verdict) -> Outcome | None:
    """Apply an APPLY verdict once per closing; None when its outcome key was applied already.

    The key is checked and recorded in the caller's transaction, so a duplicate delivery,
    an edit of a closed PR or a backfill re-run (or another worker meanwhile) changes nothing.
    """
    if verdict.step is not Step.APPLY:
        raise ValueError(f"{verdict.seen.key}: a {verdict.step} verdict has nothing to apply")
    pull = tracking.observe(session, verdict.seen)[0]
    if pull.outcome_evidence == verdict.key:
        return None
    outcome = settle(
        session,
        pull,
        bot=verdict.bot,
        actor=verdict.actor,
        demote=verdict.demote,
        evidence_at=verdict.evidence_at,
    )
    pull.outcome_evidence = verdict.key
    return outcome
