"""The lessons a pull request's changed files are anchored to, ranked, and their loads.

The rule: a lesson is listed when one of its globs (`pr_files`) matches a file the PR changes
(or a renamed file's old path), at most ``limit``, ranked by its relevance estimate for the
PR's title and body (those the search did not rank come after, by how many files they match,
then by id). Each lesson's estimate is the one a search naming its file gives
(`anchored.estimate`): the anchor is the evidence the estimate stands in for when a
ticket's words are all there is, and a PR's title ("Bump deps") says little of the files it
touches. The relevance floor applies to that estimate as to the lessons comment: the default
floor hides no anchored lesson, a repository that raises its floor above the anchor's
estimate hears only of lessons whose words fit the PR too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import String, cast, select
from sqlalchemy.orm import Session

from playbook.anchors import pr_files
from playbook.models import Bullet
from playbook.outcomes import tracking, usage
from playbook.search import anchored, retrieval
from playbook.search.floor import Floor
from playbook.search.text import Ticket

CONSUMER = "playbook-bot"


@dataclass(frozen=True)
class AnchoredLesson:
    """A lesson to list: its id, text, the changed files it is anchored to, and its estimate."""

    bullet_id: str
    text: str
    files: tuple[str, ...]
    hit: retrieval.Hit | None = None  # the search's hit for the PR's text, when it ranked one
    stale: bool = False  # flagged stale_suspect: the code it describes changed since


# Anchored: paths neither SQL NULL nor JSON null nor an empty list (a JSON column keeps a
# Python None written to it as JSON null, which IS NOT NULL does not tell apart).
_ANCHORED = Bullet.paths.is_not(None) & cast(Bullet.paths, String).not_in(["null", "[]"])


def _scopes(scope: str | None) -> list[str]:
    return ["global", *([scope] if scope else [])]


def any_anchored(session: Session, scope: str | None) -> bool:
    """Whether an active lesson of ``scope`` (or global) is anchored to files at all."""
    found = session.scalar(
        select(Bullet.id)
        .where(Bullet.status == "active", Bullet.scope.in_(_scopes(scope)), _ANCHORED)
        .limit(1)
    )
    return found is not None


def choose(
    session: Session,
    ticket: Ticket,
    changed: Sequence[pr_files.ChangedFile],
    limit: int,
    floor: Floor | None = None,
) -> list[AnchoredLesson]:
    """The active lessons of the ticket's scope (and global) anchored to ``changed``, ranked,
    those under ``floor`` left out (none at all when the best is under the comment's floor)."""
    if not changed:
        return []
    rows = session.execute(
        select(Bullet.id, Bullet.text, Bullet.paths, Bullet.stale_since).where(
            Bullet.status == "active",
            Bullet.scope.in_(_scopes(ticket.scope)),
            _ANCHORED,
        )
    ).all()
    texts = {row.id: (row.text, row.stale_since is not None) for row in rows}
    matched = pr_files.anchored(((row.id, row.paths) for row in rows), changed)
    if not matched:
        return []
    # The estimates of the search the lessons comment would make for the PR's text.
    result = retrieval.Retriever.shared(session).search(session, ticket, k=retrieval.POOL)
    hits = {hit.bullet_id: hit for hit in result.hits}

    def level(found: pr_files.Anchored) -> float:
        hit = hits.get(found.bullet_id)
        if hit is not None and hit.anchor:
            return hit.relevance or 0.0  # the search saw the anchor already
        return anchored.estimate(hit.relevance if hit is not None else None)

    def order(found: pr_files.Anchored) -> tuple[float, int, str]:
        hit = hits.get(found.bullet_id)
        fit = hit.relevance if hit is not None and hit.relevance is not None else -1.0
        return (-fit, -len(found.files), found.bullet_id)

    if floor is not None:
        if max(map(level, matched)) < floor.comment:
            return []
        matched = [found for found in matched if level(found) >= floor.lesson]
    return [
        AnchoredLesson(
            found.bullet_id,
            texts[found.bullet_id][0],
            found.files,
            hits.get(found.bullet_id),
            texts[found.bullet_id][1],
        )
        for found in sorted(matched, key=order)[:limit]
    ]


def record_loads(session: Session, pr_key: str, shown: Sequence[str]) -> int:
    """The shown lessons as loads of the PR's tickets (the PR itself when it links none).

    Each (ticket, lesson) once, whatever the pushes, and the same key as the lessons
    comment's: a lesson shown on a ticket and on its PR loads once. Returns how many are new.
    """
    known = set(session.scalars(select(Bullet.id).where(Bullet.id.in_(list(shown)))))
    ids = [bullet_id for bullet_id in dict.fromkeys(shown) if bullet_id in known]
    if not ids:
        return 0
    recorded = 0
    for ticket in tracking.tickets_of(session, pr_key) or [pr_key]:
        recorded += len(
            usage.record(
                session,
                "loaded",
                ids,
                ticket_key=ticket,
                ranks=list(range(1, len(ids) + 1)),
                consumer=CONSUMER,
                pr_key=pr_key,
                dedup_keys=[usage.once_key("loaded", ticket, bullet_id) for bullet_id in ids],
            )
        )
    return recorded
