"""Lesson embeddings: stored per lesson with model and text hash, and a per-process cosine index."""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
import weakref
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import numpy as np
from sqlalchemy import Engine, select, update
from sqlalchemy.orm import Session

from playbook import clock
from playbook.errors import InvalidInput
from playbook.models import Bullet, Embedding, PlaybookMeta
from playbook.search import sync as synced
from playbook.version import playbook_version

log = logging.getLogger(__name__)
COUNTER = "embedding_version"
# Past this many vectors in the searched scopes (and with usearch installed) the nearest are
# found by an approximate graph; below it, by one exact matrix product. Measured (bench/
# semantic_speed.py, 2 cores, 384 dimensions): the exact product takes about 0.24 ms per
# thousand vectors (24 ms p50 at 100,000), the graph 7 ms at 100,000; here exact stays near
# 6 ms, leaving the rest of the 20 ms goal to the text side of the rerank.
APPROXIMATE_MIN = 25_000
# Rows read per batch when loading every embedding: bounds the decoded rows held at once.
LOAD_BATCH = 5_000
_INITIAL = 256


class UnusableQuery(ValueError):
    """A query vector the index cannot compare with its vectors; the message says why."""


class DimensionMismatch(UnusableQuery):
    """A query vector whose length is not the stored embeddings' length."""


def text_hash(text: str) -> str:
    """The SHA-256 (hex) of a lesson's text as it is embedded: a changed text needs a new vector."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def embedding_version(session: Session) -> int:
    """The counter every embedding write bumps (0 before the first)."""
    return session.scalar(_VERSION) or 0


def save(
    session: Session,
    bullet_id: str,
    *,
    model: str,
    text_hash: str,
    vector: Sequence[float] | np.ndarray,
) -> None:
    """Store (or replace) a lesson's embedding, stamped with a newly bumped embedding version."""
    values = np.asarray(vector, dtype="<f4").ravel()
    if values.size == 0 or not np.isfinite(values).all():
        raise InvalidInput("vector must be a non-empty list of finite numbers")
    if not model:
        raise InvalidInput("model must not be empty")
    # Bumped first: on PostgreSQL the UPDATE locks the counter row, so two writers of one
    # lesson's embedding queue here and the second finds the first's row below.
    version = _bump(session)
    row = session.get(Embedding, bullet_id)
    if row is None:
        row = Embedding(bullet_id=bullet_id)
        session.add(row)
    row.model, row.text_hash, row.dim = model, text_hash, int(values.size)
    row.vector, row.version, row.computed_at = values.tobytes(), version, clock.now()
    session.flush()


def _bump(session: Session) -> int:
    updated = session.execute(
        update(PlaybookMeta).where(PlaybookMeta.key == COUNTER).values(value=PlaybookMeta.value + 1)
    )
    if not updated.rowcount:  # a database made without the migration's row
        session.add(PlaybookMeta(key=COUNTER, value=1))
        session.flush()
    return embedding_version(session)


def stale(session: Session, model: str, *, limit: int | None = None) -> list[tuple[str, str]]:
    """Active lessons (id, text) whose embedding is missing, by another model or of another text."""
    query = (
        select(Bullet.id, Bullet.text, Embedding.model, Embedding.text_hash)
        .outerjoin(Embedding, Embedding.bullet_id == Bullet.id)
        .where(Bullet.status == "active")
        .order_by(Bullet.id)
        .execution_options(yield_per=LOAD_BATCH)
    )
    found: list[tuple[str, str]] = []
    # Closed when done: stopping at ``limit`` leaves PostgreSQL's streaming cursor open.
    with session.execute(query) as rows:
        for bullet_id, text, stored_model, stored_hash in rows:
            if stored_model != model or stored_hash != text_hash(text):
                found.append((bullet_id, text))
                if limit is not None and len(found) >= limit:
                    break
    return found


def current(session: Session, bullet_id: str, model: str) -> bool:
    """Whether the lesson's stored embedding is by ``model`` and of its current text."""
    row = session.execute(
        select(Bullet.text, Embedding.model, Embedding.text_hash)
        .join(Embedding, Embedding.bullet_id == Bullet.id)
        .where(Bullet.id == bullet_id)
    ).first()
    return row is not None and row.model == model and row.text_hash == text_hash(row.text)


class VectorIndex:
    """One model's lesson vectors, normalized, kept in step with the database by two counters.

    The embedding version says which vectors changed; the playbook version which lessons did
    (text, status, scope). A vector counts only while its lesson is active and its text still
    hashes to the hash it was computed from: an edited lesson keeps its text rank until the
    worker embeds it again.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.approximate_ready = threading.Event()  # set once an approximate graph serves
        self._model: str | None = None
        self._versions: tuple[int, int] | None = None  # (embedding, playbook) read up to
        self._rollbacks = synced._rollbacks
        self._clear()

    def _clear(self) -> None:
        self._dim: int | None = None
        self._slot: dict[str, int] = {}
        self._ids: list[str | None] = []
        self._hash: list[str] = []  # the text hash each slot's vector was computed from
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._usable = np.zeros(_INITIAL, dtype=bool)
        self._scope = np.zeros(_INITIAL, dtype=np.int32)
        self._scopes: dict[str, int] = {}
        self._approximate: _Approximate | None = None
        # While a graph is built in the background: the slots written since its snapshot.
        self._pending: set[int] | None = None
        self._generation = getattr(self, "_generation", 0) + 1
        self.approximate_ready.clear()

    @classmethod
    def shared(cls, session: Session) -> VectorIndex:
        """The process's vector index for the session's database (one per database)."""
        engine = session.get_bind()
        engine = getattr(engine, "engine", engine)
        with _SHARED_LOCK:
            index = _SHARED.get(engine)
            if index is None:
                index = _SHARED[engine] = cls()
            return index

    def __len__(self) -> int:
        """How many vectors can be found now (active lessons, current text)."""
        return int(self._usable[: len(self._ids)].sum())

    @property
    def dim(self) -> int | None:
        """The stored vectors' length (None before any)."""
        return self._dim

    def sync(self, session: Session, model: str) -> None:
        """Read the vectors and lessons changed since the last sync (everything the first time)."""
        versions = (embedding_version(session), playbook_version(session))
        with self._lock:
            if self._rollbacks != synced._rollbacks:
                # A session of this process that we may have read from rolled back.
                self._rollbacks, self._versions = synced._rollbacks, None
            if self._versions is None or model != self._model:
                self._load(session, model)
            elif versions == self._versions:
                return
            elif versions[0] >= self._versions[0] and versions[1] >= self._versions[1]:
                self._apply(session, *self._versions)
            elif synced._open:
                return  # ahead through a session of this process that has not ended yet
            else:
                self._load(session, model)  # the database went back: restored, or emptied
            self._versions = versions

    def _load(self, session: Session, model: str) -> None:
        self._clear()
        self._model = model
        self._read(session, _ROWS.where(Embedding.model == model), batched=True)

    def _apply(self, session: Session, embeddings_since: int, playbook_since: int) -> None:
        self._read(session, _ROWS.where(Embedding.version > embeddings_since))
        changed = session.execute(
            select(Bullet.id, Bullet.text, Bullet.status, Bullet.scope).where(
                Bullet.version > playbook_since
            )
        ).all()
        for bullet_id, text, status, scope in changed:
            slot = self._slot.get(bullet_id)
            if slot is not None:
                usable = status == "active" and text_hash(text) == self._hash[slot]
                self._usable[slot] = usable
                self._scope[slot] = self._scope_code(scope)
        if changed:
            synced._mark_read(session)

    def _read(self, session: Session, query, batched: bool = False) -> None:
        if batched:
            query = query.execution_options(yield_per=LOAD_BATCH)
        read = 0
        for batch in session.execute(query).partitions(LOAD_BATCH):
            read += len(batch)
            self._grow(len(self._ids) + len(batch))
            for row in batch:
                self._put(row)
        if read:
            synced._mark_read(session)

    def _put(self, row) -> None:
        """Place one (embedding, lesson) row, or drop the lesson's vector when it no longer fits."""
        slot = self._slot.get(row.bullet_id)
        if self._dim is None and row.model == self._model:
            self._dim = row.dim
            self._matrix = np.zeros((len(self._usable), row.dim), dtype=np.float32)
        if row.model != self._model or row.dim != self._dim:
            if slot is not None:  # re-embedded by another model: this index no longer has it
                self._usable[slot] = False
            return
        if slot is None:
            slot = self._slot[row.bullet_id] = len(self._ids)
            self._ids.append(row.bullet_id)
            self._hash.append(row.text_hash)
        vector = np.frombuffer(bytes(row.vector), dtype="<f4").astype(np.float32)
        norm = float(np.linalg.norm(vector))
        self._matrix[slot] = vector / norm if norm else 0.0
        if self._approximate is not None:
            self._approximate.put(slot, self._matrix[slot])
        elif self._pending is not None:
            self._pending.add(slot)
        self._hash[slot] = row.text_hash
        current = row.status == "active" and text_hash(row.text) == row.text_hash
        self._usable[slot] = current and norm > 0
        self._scope[slot] = self._scope_code(row.scope)

    def _scope_code(self, scope: str) -> int:
        return self._scopes.setdefault(scope, len(self._scopes))

    def _grow(self, needed: int) -> None:
        if needed <= len(self._usable):
            return
        size = max(needed, 2 * len(self._usable))
        self._usable = np.concatenate([self._usable, np.zeros(size - len(self._usable), bool)])
        self._scope = np.concatenate([self._scope, np.zeros(size - len(self._scope), np.int32)])
        if self._dim is not None:
            grown = np.zeros((size, self._dim), dtype=np.float32)
            grown[: len(self._ids)] = self._matrix[: len(self._ids)]
            self._matrix = grown

    def top(
        self,
        query: np.ndarray | Sequence[float],
        n: int,
        allowed: Callable[[str], bool] | Collection[str] | None = None,
        *,
        scopes: Iterable[str] | None = None,
    ) -> list[tuple[str, float]]:
        """The ``n`` usable lessons most like ``query`` by cosine, best first, as (id, cosine).

        ``scopes`` keeps lessons of those scopes only; ``allowed`` (a set of ids or a test of
        one) narrows them further. Raises DimensionMismatch when ``query`` has another length
        than the stored vectors, UnusableQuery when it is zero or not finite.
        """
        vector = self._unit(query)
        with self._lock:
            count = len(self._ids)
            if vector is None or self._dim is None or count == 0 or n < 1:
                return []
            mask = self._usable[:count].copy()
            if scopes is not None:
                codes = [self._scopes[s] for s in scopes if s in self._scopes]
                mask &= np.isin(self._scope[:count], np.array(codes, dtype=np.int32))
            if isinstance(allowed, Collection) and not isinstance(allowed, str):
                keep = np.zeros(count, dtype=bool)
                keep[[self._slot[i] for i in allowed if i in self._slot]] = True
                mask &= keep
                allowed = None
            wanted = n if allowed is None else n * 4
            chosen: np.ndarray | None = np.flatnonzero(mask)
            if len(chosen) >= APPROXIMATE_MIN and graph_library() is not None:
                if self._approximate is not None:
                    slots, sims = self._approximate.nearest(vector, mask, wanted)
                    chosen = None
                else:
                    self._build_approximate(count)  # exact meanwhile
            matrix, names = self._matrix, self._ids
        if chosen is not None:
            # Outside the lock: concurrent searches multiply at once (numpy lets go of the
            # GIL), and a sync meanwhile only replaces the arrays or rewrites a row in place.
            slots, sims = _exact(matrix, names, vector, chosen, count, wanted)
        ids = [names[slot] for slot in slots]
        found = [
            (bullet_id, float(sim))
            for bullet_id, sim in zip(ids, sims, strict=True)
            if bullet_id is not None and (allowed is None or allowed(bullet_id))
        ]
        return found[:n]

    def cosines(self, query: np.ndarray | Sequence[float], ids: Iterable[str]) -> dict[str, float]:
        """The cosine of ``query`` with each of ``ids`` that has a usable vector."""
        vector = self._unit(query)
        with self._lock:
            slots = [(i, self._slot[i]) for i in ids if i in self._slot]
            slots = [(i, s) for i, s in slots if self._usable[s]]
            if vector is None or not slots:
                return {}
            sims = self._matrix[[s for _, s in slots]] @ vector
        return {bullet_id: float(sim) for (bullet_id, _), sim in zip(slots, sims, strict=True)}

    def _unit(self, query: np.ndarray | Sequence[float]) -> np.ndarray | None:
        """``query`` as a unit float32 vector (None before any vector is stored)."""
        vector = np.asarray(query, dtype=np.float32).ravel()
        if self._dim is not None and vector.size != self._dim:
            raise DimensionMismatch(
                f"the query embedding has {vector.size} dimensions, "
                f"the stored embeddings {self._dim}"
            )
        if self._dim is None:
            return None
        norm = float(np.linalg.norm(vector))
        if not norm or not np.isfinite(norm):
            raise UnusableQuery("the query embedding is zero or not finite")
        return vector / norm

    def _build_approximate(self, count: int) -> None:
        """Start building the approximate index in the background, unless it is under way.

        A graph of 100,000 vectors takes minutes on two cores: no search waits for it. The
        vectors written meanwhile are added when it is done; from then on each sync keeps it
        in step vector by vector (see _put).
        """
        if self._pending is not None:
            return
        self._pending, generation = set(), self._generation
        snapshot = self._matrix[:count].copy()
        self.approximate_ready.clear()

        def build() -> None:
            try:
                graph = _Approximate(snapshot)
            except Exception:  # a cache: the exact search goes on without it
                log.exception("could not build the approximate vector index")
                return
            with self._lock:
                if generation != self._generation or self._pending is None:
                    return  # reloaded meanwhile: a later search starts again
                for slot in sorted(self._pending):
                    graph.put(slot, self._matrix[slot])
                self._approximate, self._pending = graph, None
            self.approximate_ready.set()

        threading.Thread(target=build, name="playbook-vector-graph", daemon=True).start()


def _exact(
    matrix: np.ndarray,
    ids: list[str | None],
    vector: np.ndarray,
    chosen: np.ndarray,
    count: int,
    n: int,
) -> tuple[list[int], list[float]]:
    """Slots and cosines of the ``n`` chosen rows nearest ``vector``, best first: one product."""
    if not len(chosen):
        return [], []
    # A few scopes of many: multiply only their rows; else every row, then pick.
    few = len(chosen) * 2 < count
    sims = matrix[chosen] @ vector if few else (matrix[:count] @ vector)[chosen]
    take = min(n, len(chosen))
    best = np.argpartition(-sims, take - 1)[:take] if take < len(chosen) else np.arange(take)
    # Ties broken by lesson id, so equal vectors rank the same in every process.
    order = sorted(best, key=lambda i: (-float(sims[i]), ids[chosen[i]] or ""))
    return [int(chosen[i]) for i in order], [float(sims[i]) for i in order]


class _Approximate:
    """An HNSW graph (usearch) over the stored rows, asked for more than needed, then filtered."""

    def __init__(self, matrix: np.ndarray) -> None:
        # Every stored vector, usable or not: the search's mask says which count, so an
        # edit or a status change needs no change to the graph.
        library = graph_library()
        assert library is not None  # built only when it is installed
        self._index = library.Index(ndim=matrix.shape[1], metric="ip", dtype="f32")
        self._index.add(np.arange(len(matrix), dtype=np.uint64), matrix)
        self._size = len(matrix)

    def put(self, slot: int, vector: np.ndarray) -> None:
        """Add or replace one slot's vector."""
        if slot < self._size:
            self._index.remove(slot)
        self._index.add(slot, vector)
        self._size = max(self._size, slot + 1)

    def nearest(self, vector: np.ndarray, mask: np.ndarray, n: int) -> tuple[list[int], list]:
        wanted = min(self._size, max(n * 2, 64))
        while True:
            found = self._index.search(vector, wanted)
            keys = np.asarray(found.keys, dtype=np.int64)
            # usearch's "ip" distance is 1 - inner product.
            sims = 1.0 - np.asarray(found.distances, dtype=np.float32)
            kept = [(int(s), float(d)) for s, d in zip(keys, sims, strict=True) if mask[s]]
            if len(kept) >= n or wanted >= self._size:
                kept = kept[:n]
                return [s for s, _ in kept], [d for _, d in kept]
            wanted = min(self._size, wanted * 4)


def forget_shared() -> None:
    """Drop every process-wide vector index: for when a database was emptied or restored."""
    with _SHARED_LOCK:
        _SHARED.clear()


@functools.cache
def graph_library() -> Any | None:
    """usearch's index module, or None when the optional `semantic` extra is not installed.

    Imported on first need, not with this module: it takes about 0.16 s, which every command's
    start would pay, and most playbooks never reach the graph's size.
    """
    try:
        import usearch.index as library
    except ImportError:  # the exact product serves any size, only slower
        return None
    return library


_VERSION = select(PlaybookMeta.value).where(PlaybookMeta.key == COUNTER)
_COLUMNS = (
    Embedding.bullet_id,
    Embedding.model,
    Embedding.text_hash,
    Embedding.dim,
    Embedding.vector,
    Bullet.text,
    Bullet.status,
    Bullet.scope,
)
_ROWS = select(*_COLUMNS).join_from(Embedding, Bullet, Bullet.id == Embedding.bullet_id)
_SHARED: weakref.WeakKeyDictionary[Engine, VectorIndex] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()
