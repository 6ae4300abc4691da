"""An incremental BM25 index whose scores equal rank_bm25.BM25Okapi on the same tokens.

rank_bm25 rebuilds its statistics and scans every document for every query. This index
keeps postings (term -> documents) updated as bullets change and scores only the
documents that contain a query term, which gives the same numbers: in BM25Okapi a
document without the term scores exactly 0 for it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

import numpy as np

K1 = 1.5
B = 0.75
EPSILON = 0.25
_INITIAL = 1024


class BM25Index:
    """Documents (id, tokens, scope) with BM25Okapi scoring over the live ones."""

    def __init__(self, k1: float = K1, b: float = B, epsilon: float = EPSILON) -> None:
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self._slot: dict[str, int] = {}  # doc id -> slot
        self._ids: list[str | None] = []  # slot -> doc id (None once removed)
        self._terms: list[Counter[str]] = []  # slot -> term frequencies (for removal)
        self._length = np.zeros(_INITIAL, dtype=np.float64)
        self._scope = np.zeros(_INITIAL, dtype=np.int32)
        self._alive = np.zeros(_INITIAL, dtype=bool)
        self._stamp = np.zeros(_INITIAL, dtype=np.float64)  # caller's number, e.g. a time
        self._scopes: dict[str, int] = {}
        self._df: dict[str, int] = {}
        # term -> (slots, tfs) arrays, and appends not yet folded into them
        self._postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._pending: dict[str, list[tuple[int, int]]] = {}
        self._total_length = 0
        self._dead = 0
        self._idf_sum: float | None = None  # sum of raw idf over the vocabulary, when fresh
        self._norm: np.ndarray | None = None  # k1 * (1 - b + b * dl / avgdl), when fresh

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._slot

    # --- changes -------------------------------------------------------------------------

    def add(
        self, doc_id: str, tokens: Sequence[str], scope: str = "global", stamp: float = 0.0
    ) -> None:
        """Index a document (replacing any document with the same id).

        ``stamp`` is kept for ``ranked``'s ``weigh`` (the retriever stores when the
        lesson last changed).
        """
        if doc_id in self._slot:
            self.remove(doc_id)
        slot = len(self._ids)
        if slot >= len(self._length):
            self._grow()
        counts = Counter(tokens)
        self._slot[doc_id] = slot
        self._ids.append(doc_id)
        self._terms.append(counts)
        self._length[slot] = len(tokens)
        self._scope[slot] = self._scopes.setdefault(scope, len(self._scopes))
        self._alive[slot] = True
        self._stamp[slot] = stamp
        self._total_length += len(tokens)
        for term, tf in counts.items():
            self._df[term] = self._df.get(term, 0) + 1
            self._pending.setdefault(term, []).append((slot, tf))
        self._stale()

    replace = add

    def remove(self, doc_id: str) -> None:
        """Forget a document; unknown ids are ignored."""
        slot = self._slot.pop(doc_id, None)
        if slot is None:
            return
        self._ids[slot] = None
        self._alive[slot] = False
        self._total_length -= int(self._length[slot])
        for term in self._terms[slot]:
            left = self._df[term] - 1
            if left:
                self._df[term] = left
            else:
                del self._df[term]  # BM25Okapi's vocabulary only has words that occur
        self._terms[slot] = Counter()
        self._dead += 1
        self._stale()
        if self._dead > 1000 and self._dead > len(self._slot):
            self._compact()

    def _stale(self) -> None:
        self._idf_sum = None
        self._norm = None

    def _grow(self) -> None:
        size = len(self._length) * 2
        for name in ("_length", "_scope", "_alive", "_stamp"):
            old = getattr(self, name)
            new = np.zeros(size, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def _compact(self) -> None:
        live = [
            (doc_id, self._terms[slot], int(self._scope[slot]), float(self._stamp[slot]))
            for doc_id, slot in self._slot.items()
        ]
        names = {code: name for name, code in self._scopes.items()}
        self.__init__(self.k1, self.b, self.epsilon)  # type: ignore[misc]
        for doc_id, counts, code, stamp in live:
            self.add(doc_id, list(counts.elements()), names[code], stamp)

    # --- statistics ------------------------------------------------------------------------

    def idf(self, term: str) -> float:
        """The term's idf exactly as BM25Okapi computes it (0 for an unknown term)."""
        df = self._df.get(term)
        if df is None:
            return 0.0
        n = len(self._slot)
        value = math.log(n - df + 0.5) - math.log(df + 0.5)
        if value < 0:
            return self.epsilon * self._average_idf()
        return value

    def _average_idf(self) -> float:
        if self._idf_sum is None:
            n = len(self._slot)
            df = np.fromiter(self._df.values(), dtype=np.float64, count=len(self._df))
            self._idf_sum = float(np.sum(np.log(n - df + 0.5) - np.log(df + 0.5)))
        return self._idf_sum / len(self._df) if self._df else 0.0

    def _norms(self) -> np.ndarray:
        if self._norm is None:
            avgdl = self._total_length / len(self._slot) if self._slot else 1.0
            self._norm = self.k1 * (1 - self.b + self.b * self._length / (avgdl or 1.0))
        return self._norm

    def _posting(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        pending = self._pending.pop(term, None)
        slots, tfs = self._postings.get(term, (np.empty(0, np.int64), np.empty(0, np.float64)))
        if pending:
            extra = np.array(pending, dtype=np.int64)
            slots = np.concatenate([slots, extra[:, 0]])
            tfs = np.concatenate([tfs, extra[:, 1].astype(np.float64)])
        if pending or term in self._postings:
            keep = self._alive[slots]
            if not keep.all():  # drop removed documents from the posting as we pass
                slots, tfs = slots[keep], tfs[keep]
            self._postings[term] = (slots, tfs)
        return slots, tfs

    # --- search ----------------------------------------------------------------------------

    def scores(self, query: Iterable[str]) -> dict[str, float]:
        """Every document's non-zero score for ``query`` (BM25Okapi's get_scores, sparsely)."""
        total, touched = self._accumulate(query)
        return {self._ids[s]: float(total[s]) for s in touched if self._ids[s] is not None}  # type: ignore[misc]

    def scores_of(self, query: Iterable[str], doc_ids: Iterable[str]) -> dict[str, float]:
        """The scores of some documents for ``query`` (documents it does not touch are left out)."""
        total, touched = self._accumulate(query)
        hit = set(touched.tolist())
        slots = {doc_id: self._slot[doc_id] for doc_id in doc_ids if doc_id in self._slot}
        return {doc_id: float(total[slot]) for doc_id, slot in slots.items() if slot in hit}

    def _accumulate(self, query: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        total = np.zeros(len(self._ids), dtype=np.float64)
        if not self._slot:
            return total, np.empty(0, np.int64)
        norms = self._norms()
        hit = np.zeros(len(self._ids), dtype=bool)
        for term, repeats in Counter(query).items():
            if term not in self._df:
                continue
            weight = self.idf(term) * repeats
            slots, tfs = self._posting(term)
            total[slots] += weight * (tfs * (self.k1 + 1) / (tfs + norms[slots]))
            hit[slots] = True
        return total, np.flatnonzero(hit)

    def search(
        self, query: Sequence[str], k: int = 10, scopes: Iterable[str] | None = None
    ) -> list[tuple[str, float]]:
        """The top ``k`` documents containing a query term, best first (ties by id)."""
        return [(doc_id, score) for doc_id, score, _ in self.ranked(query, k, scopes)]

    def ranked(
        self,
        query: Sequence[str],
        k: int = 10,
        scopes: Iterable[str] | None = None,
        weigh: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    ) -> list[tuple[str, float, float]]:
        """The top ``k`` documents as (id, score, key), by key, best first (ties by id).

        Without ``weigh`` the key is the score; with it, ``weigh(scores, stamps)`` gives the
        keys of the matching documents.
        """
        total, touched = self._accumulate(query)
        if scopes is not None and len(touched):
            codes = [self._scopes[s] for s in scopes if s in self._scopes]
            touched = touched[np.isin(self._scope[touched], codes)]
        if not len(touched):
            return []
        scores = total[touched]
        keys = scores if weigh is None else weigh(scores, self._stamp[touched])
        if len(touched) > k:
            # Keep every document tied with the k-th so the id tie-break is exact.
            kth = np.partition(keys, len(touched) - k)[len(touched) - k]
            keep = keys >= kth
            touched, scores, keys = touched[keep], scores[keep], keys[keep]
        ranked = sorted(
            zip((-keys).tolist(), [self._ids[s] for s in touched], scores.tolist(), strict=True)
        )
        return [(doc_id, score, -key) for key, doc_id, score in ranked[:k]]  # type: ignore[misc]
