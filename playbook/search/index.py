"""An incremental BM25 index with Lucene's idf, built in bulk, saved and loaded as bytes.

Scores are BM25 with rank_bm25.BM25Okapi's k1, b and length normalisation, but with Lucene's
idf, ``log(1 + (N - n + 0.5) / (n + 0.5))``, which is above zero for every term. Okapi's own
idf, ``log((N - n + 0.5) / (n + 0.5))``, is 0 for a term in half the documents and negative
past that: in a small playbook a lesson that matches the ticket scored 0 or below, tied with
or under lessons that match nothing. With a positive idf every document sharing a term with
the query scores above every document sharing none, at any size.

The index is postings only (term -> documents, tfs): documents filled in bulk or loaded from
bytes live in compressed-row arrays, documents added later in per-term lists folded into
arrays on the next search that reads the term. A removed document is only marked dead: a
term's document frequency is its live postings, counted when a query reads it, so neither a
forward index nor a vocabulary-wide count has to be kept, saved or loaded.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

import numpy as np

K1 = 1.5
B = 0.75
_INITIAL = 1024
# Bumped when the bytes written by `to_bytes` change shape.
FORMAT = 1
_DOC_ARRAYS = ("_length", "_scope", "_alive", "_stamp")


class BM25Index:
    """Documents (id, tokens, scope, stamp) with BM25 scoring over the live ones."""

    def __init__(self, k1: float = K1, b: float = B) -> None:
        self.k1, self.b = k1, b
        self._slot: dict[str, int] = {}  # doc id -> slot
        self._ids: list[str | None] = []  # slot -> doc id (None once removed)
        self._vocab: dict[str, int] = {}  # term -> term id
        self._length = np.zeros(_INITIAL, dtype=np.float64)
        self._scope = np.zeros(_INITIAL, dtype=np.int32)
        self._alive = np.zeros(_INITIAL, dtype=bool)
        self._stamp = np.zeros(_INITIAL, dtype=np.float64)  # caller's number, e.g. a time
        self._scopes: dict[str, int] = {}
        # The bulk postings: the entries of term t are inv_ptr[t]:inv_ptr[t + 1], by slot.
        self._inv_ptr = np.zeros(1, dtype=np.int64)
        self._inv_slots = np.empty(0, dtype=np.int32)
        self._inv_tfs = np.empty(0, dtype=np.int32)
        self._pending: dict[int, list[tuple[int, int]]] = {}  # added since, not yet folded
        self._postings: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # folded and filtered
        self._total_length = 0
        self._dead = 0
        self._generation = 0  # bumped by every change: cached weights are for one generation
        self._norm: np.ndarray | None = None  # k1 * (1 - b + b * dl / avgdl), when fresh
        self._weights: dict[int, tuple[int, np.ndarray, np.ndarray]] = {}

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
        self.remove(doc_id)
        slot = self._new_slot(doc_id, len(tokens), scope, stamp)
        for token, tf in Counter(tokens).items():
            self._pending.setdefault(self._term_id(token), []).append((slot, tf))
        self._changed()

    replace = add

    def remove(self, doc_id: str) -> None:
        """Forget a document; unknown ids are ignored."""
        slot = self._slot.pop(doc_id, None)
        if slot is None:
            return
        self._ids[slot] = None
        self._alive[slot] = False
        self._total_length -= int(self._length[slot])
        self._dead += 1
        self._changed()
        if self._dead > 1000 and self._dead > len(self._slot):
            self._compact()

    def bulk(self, docs: Iterable[tuple[str, Sequence[str], str, float]]) -> None:
        """Index many (id, tokens, scope, stamp) documents at once: the fast way to fill it.

        Documents already indexed are replaced; of one id given twice, the last one counts.
        """
        docs = list({doc[0]: doc for doc in docs}.values())
        for doc_id, *_ in docs:
            self.remove(doc_id)
        if not docs:
            return
        self._grow(len(self._ids) + len(docs))
        first = len(self._ids)
        tokens: list[str] = []
        for doc_id, doc_tokens, scope, stamp in docs:
            self._new_slot(doc_id, len(doc_tokens), scope, stamp)
            tokens.extend(doc_tokens)
        # Term ids by whole-list operations (set difference, map of a dict's C method): a
        # Python call per token would be most of the time at 100k lessons.
        new = sorted(set(tokens).difference(self._vocab))
        start = len(self._vocab)
        self._vocab.update(zip(new, range(start, start + len(new)), strict=True))
        terms = np.array(list(map(self._vocab.__getitem__, tokens)), dtype=np.int64)
        lengths = self._length[first : len(self._ids)].astype(np.int64)
        slots = np.repeat(np.arange(first, len(self._ids), dtype=np.int64), lengths)
        # (term, slot) pairs counted by one sort: postings by term, then by slot.
        width = len(self._ids) + 1
        unique, tfs = np.unique(terms * width + slots, return_counts=True)
        self._merge(unique // width, unique % width, tfs)
        self._changed()

    def _new_slot(self, doc_id: str, length: int, scope: str, stamp: float) -> int:
        slot = len(self._ids)
        self._grow(slot + 1)
        self._slot[doc_id] = slot
        self._ids.append(doc_id)
        self._length[slot] = length
        self._scope[slot] = self._scopes.setdefault(scope, len(self._scopes))
        self._alive[slot] = True
        self._stamp[slot] = stamp
        self._total_length += length
        return slot

    def _term_id(self, term: str) -> int:
        term_id = self._vocab.get(term)
        if term_id is None:
            term_id = self._vocab[term] = len(self._vocab)
        return term_id

    def _entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every posting as (term, slot, tf) arrays, by term then slot, dead ones included."""
        base_terms = np.repeat(
            np.arange(len(self._inv_ptr) - 1, dtype=np.int64), np.diff(self._inv_ptr)
        )
        # A term a search has read is folded (base and pending, filtered) in `_postings`.
        unfolded = ~np.isin(base_terms, np.fromiter(self._postings, np.int64))
        terms = [base_terms[unfolded]]
        slots = [self._inv_slots[unfolded].astype(np.int64)]
        tfs = [self._inv_tfs[unfolded].astype(np.int64)]
        for term, (term_slots, term_tfs) in self._postings.items():
            terms.append(np.full(len(term_slots), term, dtype=np.int64))
            slots.append(term_slots.astype(np.int64))
            tfs.append(term_tfs.astype(np.int64))
        for term, pending in self._pending.items():
            extra = np.array(pending, dtype=np.int64)
            terms.append(np.full(len(pending), term, dtype=np.int64))
            slots.append(extra[:, 0])
            tfs.append(extra[:, 1])
        self._pending.clear()
        all_terms, all_slots = np.concatenate(terms), np.concatenate(slots)
        # Stable by term: within a term the base part comes first, then what was added
        # after it, with later slots; so each term's postings stay in slot order.
        order = np.argsort(all_terms, kind="stable")
        return all_terms[order], all_slots[order], np.concatenate(tfs)[order]

    def _merge(self, terms: np.ndarray, slots: np.ndarray, tfs: np.ndarray) -> None:
        """Fold new postings (by term, then slot; past every existing slot) into the bulk part."""
        if self._pending or len(self._inv_slots):
            old_terms, old_slots, old_tfs = self._entries()
            live = self._alive[old_slots]
            all_terms = np.concatenate([old_terms[live], terms])
            order = np.argsort(all_terms, kind="stable")
            terms = all_terms[order]
            slots = np.concatenate([old_slots[live], slots])[order]
            tfs = np.concatenate([old_tfs[live], tfs])[order]
        self._set_postings(terms, slots, tfs)

    def _set_postings(self, terms: np.ndarray, slots: np.ndarray, tfs: np.ndarray) -> None:
        counts = np.bincount(terms.astype(np.int64), minlength=len(self._vocab))
        self._inv_ptr = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
        self._inv_slots = slots.astype(np.int32)
        self._inv_tfs = tfs.astype(np.int32)
        self._pending.clear()
        self._postings.clear()
        self._weights.clear()

    def _changed(self) -> None:
        self._generation += 1
        self._norm = None

    def _grow(self, needed: int) -> None:
        if needed <= len(self._length):
            return
        size = max(len(self._length) * 2, needed)
        for name in _DOC_ARRAYS:
            old = getattr(self, name)
            new = np.zeros(size, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def _compact(self) -> None:
        """Renumber the live documents from slot 0, dropping the removed ones."""
        terms, slots, tfs = self._entries()
        n = len(self._ids)
        alive = self._alive[:n]
        renumber = np.cumsum(alive) - 1
        live = alive[slots]
        for name in _DOC_ARRAYS:
            values = getattr(self, name)[:n][alive]
            fresh = np.zeros(max(_INITIAL, len(values)), dtype=values.dtype)
            fresh[: len(values)] = values
            setattr(self, name, fresh)
        self._ids = [doc_id for doc_id in self._ids if doc_id is not None]
        self._slot = {doc_id: slot for slot, doc_id in enumerate(self._ids)}
        self._dead = 0
        self._set_postings(terms[live], renumber[slots[live]], tfs[live])
        self._changed()

    # --- bytes ---------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The live documents as bytes (a NumPy .npz archive) that `from_bytes` reads back."""
        if self._pending or self._dead:
            self._compact()
        vocab = sorted(self._vocab, key=self._vocab.__getitem__)
        scopes = sorted(self._scopes, key=self._scopes.__getitem__)
        n = len(self._ids)
        meta = {"format": FORMAT, "k1": self.k1, "b": self.b}
        buffer = io.BytesIO()
        np.savez(
            buffer,
            meta=_json_bytes(meta),
            ids=_json_bytes(self._ids),
            vocab=_json_bytes(vocab),
            scopes=_json_bytes(scopes),
            length=self._length[:n],
            scope=self._scope[:n],
            stamp=self._stamp[:n],
            inv_ptr=self._inv_ptr,
            inv_slots=self._inv_slots,
            # A term counted more than 65,535 times in one lesson counts as that: BM25's
            # term weight has long stopped growing.
            inv_tfs=np.minimum(self._inv_tfs, 65_535).astype(np.uint16),
        )
        # Not compressed: loading is on the path of a cold start, and zlib would be most of it.
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> BM25Index:
        """An index from `to_bytes`'s output; ValueError when the bytes are not one."""
        try:
            arrays = np.load(io.BytesIO(data), allow_pickle=False)
            meta = json.loads(arrays["meta"].tobytes())
            if meta.get("format") != FORMAT:
                raise ValueError(f"index bytes of format {meta.get('format')}, not {FORMAT}")
            index = cls(float(meta["k1"]), float(meta["b"]))
            ids = json.loads(arrays["ids"].tobytes())
            vocab = json.loads(arrays["vocab"].tobytes())
            scopes = json.loads(arrays["scopes"].tobytes())
            n = len(ids)
            index._grow(n)
            for name in ("length", "scope", "stamp"):
                getattr(index, f"_{name}")[:n] = arrays[name]
            index._inv_ptr = arrays["inv_ptr"].astype(np.int64)
            index._inv_slots = arrays["inv_slots"].astype(np.int32)
            index._inv_tfs = arrays["inv_tfs"].astype(np.int32)
        except (KeyError, TypeError, ValueError, OSError, zipfile.BadZipFile) as error:
            raise ValueError(f"not index bytes ({error})") from None
        if len(index._inv_ptr) != len(vocab) + 1 or len(index._inv_slots) != index._inv_ptr[-1]:
            raise ValueError("not index bytes (postings do not match the vocabulary)")
        index._alive[:n] = True
        index._ids = ids
        index._slot = dict(zip(ids, range(n), strict=True))
        index._vocab = dict(zip(vocab, range(len(vocab)), strict=True))
        index._scopes = dict(zip(scopes, range(len(scopes)), strict=True))
        index._total_length = int(index._length[:n].sum())
        return index

    # --- statistics ------------------------------------------------------------------------

    def idf(self, term: str) -> float:
        """Lucene's idf of the term, above zero; 0 for a term no live document has."""
        term_id = self._vocab.get(term)
        df = len(self._posting(term_id)[0]) if term_id is not None else 0
        return _idf(len(self._slot), df) if df else 0.0

    def unseen_idf(self) -> float:
        """The idf of a term no live document has: the highest any term can reach here."""
        return _idf(len(self._slot), 0)

    def _norms(self) -> np.ndarray:
        if self._norm is None:
            avgdl = self._total_length / len(self._slot) if self._slot else 1.0
            self._norm = self.k1 * (1 - self.b + self.b * self._length / (avgdl or 1.0))
        return self._norm

    def _posting(self, term_id: int) -> tuple[np.ndarray, np.ndarray]:
        """The live documents with the term: (slots, tfs)."""
        folded = self._postings.get(term_id)
        if folded is None:
            if term_id + 1 < len(self._inv_ptr):
                start, end = self._inv_ptr[term_id], self._inv_ptr[term_id + 1]
                folded = (self._inv_slots[start:end], self._inv_tfs[start:end])
            else:
                folded = (np.empty(0, np.int32), np.empty(0, np.int32))
        slots, tfs = folded
        pending = self._pending.pop(term_id, None)
        if pending:
            extra = np.array(pending, dtype=np.int32)
            slots = np.concatenate([slots, extra[:, 0]])
            tfs = np.concatenate([tfs, extra[:, 1]])
        keep = self._alive[slots]
        if not keep.all():  # drop removed documents from the posting as we pass
            slots, tfs = slots[keep], tfs[keep]
        if pending or len(slots) != len(folded[0]):
            self._postings[term_id] = (slots, tfs)
        return slots, tfs

    def _weighted(self, term_id: int) -> tuple[np.ndarray, np.ndarray]:
        """The term's live documents and their BM25 term weights before idf.

        Cached for the current generation: between changes, a query reads each posting's
        weights instead of working them out again.
        """
        cached = self._weights.get(term_id)
        if cached is not None and cached[0] == self._generation:
            return cached[1], cached[2]
        slots, tfs = self._posting(term_id)
        weights = tfs * (self.k1 + 1) / (tfs + self._norms()[slots])
        if len(self._weights) > 50_000:  # bounded: a cache, not a second index
            self._weights.clear()
        self._weights[term_id] = (self._generation, slots, weights)
        return slots, weights

    # --- search ----------------------------------------------------------------------------

    def scores(self, query: Iterable[str]) -> dict[str, float]:
        """Every document's non-zero score for ``query``."""
        total, touched = self._accumulate(query)
        return {self._ids[s]: float(total[s]) for s in touched.tolist()}  # type: ignore[misc]

    def scores_of(self, query: Iterable[str], doc_ids: Iterable[str]) -> dict[str, float]:
        """The scores of some documents for ``query`` (documents it does not touch are left out)."""
        slots = {doc_id: self._slot[doc_id] for doc_id in doc_ids if doc_id in self._slot}
        if not slots:  # the usual case in a search: no cited lesson is left to score
            return {}
        total, _ = self._accumulate(query)
        return {doc_id: float(total[slot]) for doc_id, slot in slots.items() if total[slot] > 0}

    def _accumulate(self, query: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        """Every slot's score for ``query``, and the slots it touches."""
        total = self._totals(query)
        # Every idf and term weight is above zero, so the touched documents are those above it.
        return total, np.flatnonzero(total)

    def _totals(self, query: Iterable[str]) -> np.ndarray:
        """Every slot's score for ``query`` (zero for the slots it does not touch)."""
        n = len(self._slot)
        slots: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        for term, repeats in Counter(query).items():
            term_id = self._vocab.get(term)
            if term_id is None:
                continue
            term_slots, term_weights = self._weighted(term_id)
            if len(term_slots):
                slots.append(term_slots)
                weights.append((_idf(n, len(term_slots)) * repeats) * term_weights)
        if not slots:
            return np.zeros(len(self._ids), dtype=np.float64)
        # One pass summing every posting at once: quicker than adding them term by term.
        return np.bincount(
            np.concatenate(slots), weights=np.concatenate(weights), minlength=len(self._ids)
        )

    def scope_names(self) -> list[str]:
        """Every scope key a document has been added under."""
        return list(self._scopes)

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
        keys of the matching documents, which must be no higher than their scores.
        """
        total = self._totals(query)
        top = float(total.max(initial=0.0))
        if top <= 0 or k < 1:
            return []
        codes = None
        if scopes is not None:
            codes = [self._scopes[s] for s in scopes if s in self._scopes]
            if not codes:
                return []
            if len(codes) == len(self._scopes):
                codes = None  # every scope the index holds is wanted: nothing to filter
        # Most documents share some word with a long ticket, and only the best k matter. A
        # key is at most its score, so once k wanted documents have keys of at least a
        # threshold, no document scoring below it can be among the best: only those scoring
        # above it are weighed and sorted. The threshold starts at half the best score and
        # falls until that holds (at zero, every touched document is a candidate).
        threshold = top / 2
        while True:
            touched = np.flatnonzero(total >= threshold) if threshold else np.flatnonzero(total)
            if codes is not None:
                touched = touched[np.isin(self._scope[touched], codes)]
            scores = total[touched]
            keys = scores if weigh is None else weigh(scores, self._stamp[touched])
            if not threshold or np.count_nonzero(keys >= threshold) >= k:
                break
            threshold = threshold / 4 if threshold > top / 1000 else 0.0
        if not len(touched):
            return []
        if len(touched) > k:
            # Keep every document tied with the k-th so the id tie-break is exact.
            kth = np.partition(keys, len(touched) - k)[len(touched) - k]
            keep = keys >= kth
            touched, scores, keys = touched[keep], scores[keep], keys[keep]
        ranked = sorted(
            zip((-keys).tolist(), [self._ids[s] for s in touched], scores.tolist(), strict=True)
        )
        return [(doc_id, score, -key) for key, doc_id, score in ranked[:k]]  # type: ignore[misc]


def _idf(n: int, df: int) -> float:
    """Lucene's idf: above zero for every term, however many documents have it."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def _json_bytes(value: object) -> np.ndarray:
    return np.frombuffer(json.dumps(value, ensure_ascii=False).encode(), dtype=np.uint8)
