"""The search index kept in sync with the playbook: its version, changed lessons, snapshots."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import delete, event, exc, or_, select
from sqlalchemy.orm import Session, SessionTransaction

from playbook import clock
from playbook.models import Bullet, IndexSnapshot
from playbook.search.index import BM25Index
from playbook.search.text import TOKENIZER_VERSION, bullet_tokens
from playbook.version import playbook_version

log = logging.getLogger(__name__)
# A lesson waiting for approval is indexed under this prefix of its scope: searches for a
# ticket never ask for it, and the near-duplicate check at write asks for both.
PROPOSED = "proposed\x00"
LIVE = ("active", "proposed")
# Below this many lessons, tokenizing every lesson is about as quick as loading a snapshot.
SNAPSHOT_MIN_LESSONS = 1_000
# A new snapshot is saved when a sync has read more changed lessons than this since the last
# one: a cold start then reads at most about this many rows besides the snapshot. A process
# that found no snapshot saves one as soon as it has read SNAPSHOT_MIN_LESSONS.
SNAPSHOT_EVERY = 5_000
# Rows tokenized per bulk fill when building from scratch: bounds the token lists held at once.
BUILD_BATCH = 20_000
# Session flag: an index read this session's rows, which may include its uncommitted lessons.
_READ = "playbook_index_read"
_COMMITTED = "playbook_committed"
_rollbacks = 0  # sessions an index read from that ended without committing, since start
_open = 0  # sessions an index read from that have not ended yet


@event.listens_for(Session, "after_commit")
def _committed(session: Session) -> None:
    session.info[_COMMITTED] = True


@event.listens_for(Session, "after_soft_rollback")
def _rolled_back(session: Session, previous: SessionTransaction) -> None:
    """A savepoint rolled back may take lessons an index has read with it."""
    global _rollbacks
    if previous.nested and session.info.get(_READ):
        _rollbacks += 1


@event.listens_for(Session, "after_transaction_end")
def _ended(session: Session, transaction: SessionTransaction) -> None:
    """A session an index read from ended: without a commit, its lessons never were."""
    global _rollbacks, _open
    if transaction.parent is not None or transaction.nested:
        return
    committed = session.info.pop(_COMMITTED, False)
    if session.info.pop(_READ, False):
        _open -= 1
        if not committed:
            _rollbacks += 1


def _mark_read(session: Session) -> None:
    global _open
    if not session.info.get(_READ):
        session.info[_READ] = True
        _open += 1


class SyncedIndex:
    """A per-process BM25 index over live bullets, refreshed when the playbook changes.

    Each search reads the playbook version (one indexed row); when another process has
    changed bullets since, only the bullets stamped with a newer version are read again. A
    process starting up loads the newest saved snapshot of the index and reads only the
    bullets changed since it, and saves a new snapshot once enough have changed.
    """

    def __init__(self, *, snapshots: bool = True) -> None:
        self._lock = threading.Lock()
        self._index = BM25Index()
        self._version: int | None = None
        self._rollbacks = _rollbacks
        self._snapshots = snapshots
        self._since_snapshot = 0  # changed lessons read since the snapshot in use
        self._based = False  # whether the index started from, or was saved as, a snapshot
        self.loaded_from: int | None = None  # the version of the snapshot it started from

    def scope_names(self, session: Session) -> set[str]:
        """The index's scope keys, up to date: active scopes, and proposed ones prefixed."""
        self.sync(session)
        with self._lock:
            return set(self._index.scope_names())

    def idfs(self, terms: Iterable[str]) -> dict[str, float]:
        """Each term's idf in the index as last synced; a term no lesson has gets the idf of
        the rarest term there can be.

        For the relevance estimate, right after a search: no sync, so it reads the same index.
        A ticket's word that no lesson has is not noise to leave out: in a small playbook most
        of a ticket's words are such, and a lesson sharing one common word with it would
        otherwise seem to cover the whole ticket.
        """
        with self._lock:
            unseen = self._index.unseen_idf()
            return {term: self._index.idf(term) or unseen for term in set(terms)}

    def sync(self, session: Session, *, save: bool = True, writing: bool = False) -> int:
        """Bring the index up to the database's playbook version; returns that version.

        With ``save``, a snapshot is saved when enough has changed since the last one.
        ``writing`` says the session has bumped the version and may not have stamped its
        lessons with it yet (see `candidates`).
        """
        version = playbook_version(session)
        with self._lock:
            if self._rollbacks != _rollbacks:
                # Some session this process read rolled back: start again from saved state.
                self._rollbacks, self._version = _rollbacks, None
            if self._version is None:
                self._load(session)
            elif version > self._version:
                self._apply(session, self._version)
            elif version == self._version or _open:
                # Up to date, or ahead because a session of this process that has not ended
                # yet showed it lessons this one cannot see; should that session not commit,
                # the listeners above say so.
                return version
            else:
                self._load(session)  # the database went back: restored, or emptied
            self._version = version
            due = SNAPSHOT_EVERY if self._based else SNAPSHOT_MIN_LESSONS
            if save and self._since_snapshot >= due:
                # A writer's own lessons of this version may be unstamped yet: labelled one
                # version lower, the snapshot makes a loader read that version's lessons again
                # (re-reading a lesson the snapshot holds just replaces it).
                self._save(session, version - 1 if writing else version)
        return version

    def checkpoint(self, session: Session) -> None:
        """Sync, then save a snapshot of the index if it read any lesson since the last one.

        For the end of a bulk write such as an import: the next process to start then loads
        the snapshot instead of tokenizing every lesson again.
        """
        self.sync(session, save=False)
        with self._lock:
            if self._since_snapshot and self._version is not None:
                self._save(session, self._version)

    def _load(self, session: Session) -> None:
        """A fresh index: the newest usable snapshot, then the lessons changed since."""
        self._index, since = BM25Index(), None
        if self._snapshots:
            loaded = _load_snapshot(session)
            if loaded is not None:
                self._index, since = loaded
        self.loaded_from = since
        self._based = since is not None
        self._since_snapshot = 0
        self._apply(session, since)

    def _apply(self, session: Session, since: int | None) -> None:
        """Index the bullets changed after version ``since`` (all of them for None)."""
        query = select(
            Bullet.id, Bullet.text, Bullet.tags, Bullet.scope, Bullet.status, Bullet.updated_at
        )
        if since is not None:
            # A few rows as a rule: read at once (streaming costs PostgreSQL a server-side
            # cursor, whose set-up is most of a small read's time).
            rows = session.execute(query.where(Bullet.version > since))
        else:
            rows = session.execute(
                query.where(Bullet.status.in_(LIVE)).execution_options(yield_per=BUILD_BATCH)
            )
        read = 0
        for batch in rows.partitions(BUILD_BATCH):
            read += len(batch)
            live = [
                (bullet_id, bullet_tokens(text, tags), _key(scope, status), _stamp(updated_at))
                for bullet_id, text, tags, scope, status, updated_at in batch
                if status in LIVE
            ]
            if len(live) > 500:  # one sort beats hundreds of appends
                for bullet_id, *_ in batch:
                    self._index.remove(bullet_id)
                self._index.bulk(live)
            else:
                for bullet_id, _, _, _, status, _ in batch:
                    if status not in LIVE:
                        self._index.remove(bullet_id)
                for bullet_id, tokens, key, stamp in live:
                    self._index.replace(bullet_id, tokens, key, stamp)
        if read:
            _mark_read(session)
        self._since_snapshot += read

    def _save(self, session: Session, version: int) -> None:
        """Save the index as the snapshot of ``version``, in the caller's transaction.

        In the caller's transaction because the index holds what this session sees: if the
        transaction rolls back, so does the snapshot of its uncommitted lessons.
        """
        if not self._snapshots or len(self._index) < SNAPSHOT_MIN_LESSONS:
            return
        data = self._index.to_bytes()
        try:
            with session.begin_nested():
                session.execute(
                    delete(IndexSnapshot).where(
                        or_(
                            IndexSnapshot.tokenizer != TOKENIZER_VERSION,
                            IndexSnapshot.version <= version,
                        )
                    )
                )
                session.add(
                    IndexSnapshot(
                        version=version,
                        tokenizer=TOKENIZER_VERSION,
                        documents=len(self._index),
                        created_at=clock.now(),
                        data=data,
                    )
                )
        except exc.DBAPIError as error:  # a cache: a search goes on without it
            log.warning("could not save the search index snapshot (%s)", type(error).__name__)
            return
        self._since_snapshot, self._based = 0, True

    def candidates(self, session: Session, text: str, scope: str, k: int = 8) -> list[str]:
        """Live lessons in ``scope`` (active or proposed) most like ``text``: a shortlist."""
        version = self.sync(session, writing=True)
        with self._lock:
            matches = self._index.search(bullet_tokens(text), k=k, scopes={scope, PROPOSED + scope})
            # A writer asks after bumping the version and before stamping its lesson with it:
            # lessons of this version may be written yet, so the next sync reads them again.
            if self._version == version:
                self._version = version - 1
        return [bullet_id for bullet_id, _ in matches]


def _key(scope: str, status: str) -> str:
    return scope if status == "active" else PROPOSED + scope


def _stamp(updated_at: datetime | None) -> float:
    # Stamped with its last change: feedback search orders by freshness since.
    return updated_at.timestamp() if updated_at else 0.0


def _load_snapshot(session: Session) -> tuple[BM25Index, int] | None:
    """The newest snapshot this tokenizer made, as (index, version), if one can be read."""
    version = playbook_version(session)
    row = session.execute(
        select(IndexSnapshot.id, IndexSnapshot.version)
        .where(IndexSnapshot.tokenizer == TOKENIZER_VERSION, IndexSnapshot.version <= version)
        .order_by(IndexSnapshot.version.desc(), IndexSnapshot.id.desc())
        .limit(1)
    ).first()
    if row is None:
        return None
    data = session.scalar(select(IndexSnapshot.data).where(IndexSnapshot.id == row.id))
    try:
        return BM25Index.from_bytes(bytes(data or b"")), row.version
    except ValueError as error:
        log.warning("ignoring search index snapshot %s (%s)", row.id, error)
        return None
