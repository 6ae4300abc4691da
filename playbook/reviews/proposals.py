"""Proposals from review feedback: whose words count, which rules become proposed lessons.

The reads are the bot's (`bot/review_feedback.py`); here is what is decided about them: who is
trusted (write access, never the PR's author, a bot or the bot itself), what is new (not in the
batch, not in the playbook, not a proposal a maintainer rejected), and how many (`MAX_PROPOSALS`).
Nothing here makes a lesson active: every rule found ends as a proposal, whatever its text says.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from playbook.anchors.fields import check_path
from playbook.lessons import lifecycle, secrets
from playbook.lessons.fields import FieldProblem
from playbook.models import Bullet, Revision
from playbook.outcomes import evidence
from playbook.reviews import prose
from playbook.reviews.rules import rules_in

# The `source` of a proposal found by the heuristic. Any source starting so (a model's too) is
# left to a maintainer by a PR's outcome: `pull_outcome.judge` neither approves nor demotes it.
SOURCE = "review"
# Each kind of feedback read is bounded: a PR with a thousand comments is a flame war, not a
# review, and its hundred first comments hold its rules if anything does.
MAX_PER_KIND = 100
# A maintainer reviews a PR's proposals as one batch: more than this is noise to wade through.
MAX_PROPOSALS = 10
# Who proposes: the same account that captures Lessons sections.
ACTOR = evidence.ACTOR
# The kinds of feedback, in the order they are read and proposed from.
REVIEW, LINE, CONVERSATION = "review", "line", "comment"


@dataclass(frozen=True)
class Feedback:
    """One piece of human feedback on a PR, as GitHub lists it."""

    kind: str  # REVIEW (a changes-requested review's body), LINE, or CONVERSATION
    login: str | None
    is_bot: bool
    body: str
    url: str | None
    at: datetime | None = None
    # A line comment's file (repository-relative, as GitHub names it): what its rule is about.
    path: str | None = None

    def anchors(self) -> list[str] | None:
        """The lesson's anchors: a line comment's file, when it is a valid anchor; else none.

        A review's summary or a conversation comment names no file: its rules are about the
        repository's practice, not the files the PR happened to change, so they stay unanchored.
        """
        if not self.path:
            return None
        try:
            path = check_path(self.path)
        except FieldProblem:
            return None  # GitHub's path, not a person's: no lesson is refused for it
        return [path] if path else None


def is_bot(login: str | None, account_type: str | None) -> bool:
    """A bot account: GitHub's type says so, or an App's `name[bot]` login does."""
    return account_type == "Bot" or (login or "").lower().endswith("[bot]")


def bounded(body: str | None) -> str:
    """The feedback's text, never more than `prose.FEEDBACK_CHARS` of it."""
    return (body or "")[: prose.FEEDBACK_CHARS]


def candidates(
    feedback: Iterable[Feedback], author: Iterable[str | None], bot_login: str | None
) -> list[str]:
    """The distinct logins whose access must be asked, in order of first appearance.

    The PR's author (``author`` may name them twice: the payload's and the API's), bots and
    the bot itself never count, so nobody asks GitHub about them.
    """
    never = {login.lower() for login in (*author, bot_login) if login}
    found: list[str] = []
    for item in feedback:
        if not item.login or item.is_bot or item.login.lower() in never:
            continue
        if item.login not in found:
            found.append(item.login)
    return found


def trusted(feedback: Iterable[Feedback], writers: set[str]) -> list[Feedback]:
    """The feedback of people with write access (``writers``, from `candidates`' answers)."""
    return [item for item in feedback if item.login in writers and not item.is_bot]


@dataclass
class Proposals:
    """What `propose` did with one PR's feedback."""

    added: list[str] = field(default_factory=list)
    by: list[str] = field(default_factory=list)  # the reviewers whose rules were proposed
    skipped: dict[str, int] = field(default_factory=dict)  # why -> how many

    def skip(self, why: str) -> None:
        """Count one rule left out, for the log line."""
        self.skipped[why] = self.skipped.get(why, 0) + 1

    def summary(self, pr_key: str) -> str:
        """The one line logged: `owner/repo#3: 2 lessons proposed from review feedback by ...`."""
        count = len(self.added)
        line = f"{pr_key}: {count} lesson{'s' if count != 1 else ''} proposed from review feedback"
        if self.by:
            line += f" by {', '.join(self.by)}"
        if self.skipped:
            total = sum(self.skipped.values())
            reasons = ", ".join(f"{n} {why}" for why, n in self.skipped.items())
            line += f" ({total} skipped: {reasons})"
        return line


def rejected_texts(session: Session, scope: str) -> list[str]:
    """The texts of proposals in ``scope`` a maintainer rejected (deprecated while proposed).

    Every text such a lesson had counts (as proposed, as edited), so the heuristic's words are
    not proposed again after a maintainer reworded and then rejected them. The bot's own
    deprecations (a PR's outcome demoting what it captured) are no one's rejection.
    """
    rows = session.execute(
        select(Revision.bullet_id, Revision.before)
        .join(Bullet, Bullet.id == Revision.bullet_id)
        .where(Revision.action == "deprecate", Revision.actor != ACTOR, Bullet.scope == scope)
    ).all()
    ids = {bullet_id for bullet_id, before in rows if (before or {}).get("status") == "proposed"}
    if not ids:
        return []
    texts = set(session.scalars(select(Bullet.text).where(Bullet.id.in_(ids))))
    for after in session.scalars(select(Revision.after).where(Revision.bullet_id.in_(ids))):
        if isinstance(after, dict) and isinstance(after.get("text"), str):
            texts.add(after["text"])
    return sorted(texts)


def _near(text: str, others: Sequence[str]) -> bool:
    return any(
        lifecycle.word_overlap(text, other) >= lifecycle.DUPLICATE_OVERLAP for other in others
    )


def propose(
    session: Session, feedback: Sequence[Feedback], *, ticket: str, scope: str, pr_key: str
) -> Proposals:
    """Each rule in the trusted ``feedback`` as a proposed lesson learned from ``ticket``.

    A rule is left out (and counted) when it repeats one of this batch, nearly duplicates a
    live lesson of ``scope`` (`lifecycle.add` finds it), repeats a rejected proposal, holds a
    credential (never echoed), or comes after `MAX_PROPOSALS` were made.
    """
    found = [(rule.text, item) for item in feedback for rule in rules_in(bounded(item.body))]
    return propose_texts(session, found, ticket=ticket, scope=scope, pr_key=pr_key, source=SOURCE)


def propose_texts(
    session: Session,
    found: Sequence[tuple[str, Feedback]],
    *,
    ticket: str,
    scope: str,
    pr_key: str,
    source: str,
) -> Proposals:
    """Each (text, the feedback it rests on) as a proposed lesson, checked as `propose` says.

    The one door for every extractor: the heuristic's rules and a model's lessons alike end
    here, as proposals and nothing else.
    """
    done = Proposals()
    rejected = rejected_texts(session, scope)
    batch: list[str] = []
    for text, item in found:
        if _near(text, batch):
            done.skip("repeated")
            continue
        batch.append(text)
        if _near(text, rejected):
            done.skip("rejected before")
            continue
        if len(done.added) >= MAX_PROPOSALS:
            done.skip("over the cap")
            continue
        try:
            result = lifecycle.add(
                session,
                text,
                learned_from=ticket,
                actor=ACTOR,
                scope=scope,
                status="proposed",
                source=source,
                source_url=item.url,
                reason=f"review feedback by {item.login} on {pr_key}",
                paths=item.anchors(),
            )
        except secrets.HoldsCredential:  # refused before anything was written
            done.skip("holding a credential")
            continue
        except FieldProblem:  # no lesson's shape (e.g. characters a lesson may not hold)
            done.skip("not a lesson")
            continue
        if not result.created:
            done.skip("in the playbook")
            continue
        done.added.append(result.bullet.id)
        if item.login and item.login not in done.by:
            done.by.append(item.login)
    return done
