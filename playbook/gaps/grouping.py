"""Tickets grouped by what they are about: BM25-weighted vectors, cosine, connected components.

Each ticket becomes a vector over the bot's own tokens (`playbook.search.text.tokenize`, the
summary counted twice as in a query), weighted as the search index weighs a document: BM25's
saturated term frequency with its length normalisation (`index.K1`, `index.B`) times Lucene's
idf over a reference set of tickets. Two tickets are linked when the cosine of their vectors
reaches a threshold, and a group is a connected component of those links.

Words most tickets have (a template's "Describe the bug", "Environment") weigh nothing, and
words many have weigh little (idf), so they never link two tickets on their own. Candidate
pairs come only from words at most a few percent of the tickets share (an inverted index in a
sparse product), which bounds the work at thousands of tickets; the cosine of a candidate pair
still counts every word.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from playbook.search.index import K1, B
from playbook.search.text import tokenize

if TYPE_CHECKING:
    from scipy import sparse

# Linked at this cosine or above; chosen with bench/gaps.py on 7,983 Apache Jira issues grouped
# at once: at 0.30 one group already holds 814 issues (at 0.25, 3,860), at 0.35 the largest has
# 62 and a third of the duplicate pairs share a group (0.71 within 7-day windows), while 0.40
# finds a quarter fewer.
THRESHOLD = 0.35
# Only words in at most this share of the tickets (and at least CANDIDATE_FLOOR tickets, so a
# small set is not left without candidates) propose pairs: common words would propose nearly
# every pair and cost quadratic work, while a pair worth linking shares a rarer word too.
CANDIDATE_SHARE = 0.02
CANDIDATE_FLOOR = 20
# See `Weights`: the fewest tickets the idf counts, and when a word is too common to weigh. A
# template's words are in nearly every ticket; a small team's week can be mostly one problem
# (five reports among eight tickets), whose words must still link its tickets: 0.7, not 0.5.
PRIOR_TICKETS = 50
COMMON_SHARE = 0.7
COMMON_MIN_TICKETS = 8
# How many telling words a group shows.
WORDS = 6
_WORD = re.compile(r"[^\W_][\w.-]*", re.UNICODE)


@dataclass(frozen=True)
class Document:
    """A ticket's text as grouping reads it."""

    key: str
    title: str
    text: str


@dataclass(frozen=True)
class Grouping:
    """The groups (positions into the grouped documents) and each group's telling words."""

    groups: list[list[int]]
    words: list[list[str]]


def tokens_of(document: Document) -> list[str]:
    """A ticket's tokens: its searched text, and its summary once more (it says what it is)."""
    return tokenize(document.title) + tokenize(document.text)


class Weights:
    """BM25 document weights and Lucene's idf, learned from a reference set of tickets.

    A week of a small team is a handful of tickets, too few to say how rare a word is: three
    reports of one problem among four tickets would make its words look common. The idf
    counts at least PRIOR_TICKETS tickets, the missing ones sharing no word. Once there are
    enough tickets to tell (COMMON_MIN_TICKETS), a word in more than COMMON_SHARE of them is
    a template's or the product's name and weighs nothing.
    """

    def __init__(self, token_lists: Sequence[Sequence[str]]) -> None:
        self.df: Counter[str] = Counter()
        for tokens in token_lists:
            self.df.update(set(tokens))
        self.n = len(token_lists)
        lengths = [len(tokens) for tokens in token_lists]
        self.avgdl = (sum(lengths) / len(lengths)) if lengths and sum(lengths) else 1.0
        self._common = COMMON_SHARE * self.n if self.n >= COMMON_MIN_TICKETS else math.inf
        self._n = max(self.n, PRIOR_TICKETS)

    def idf(self, term: str) -> float:
        """Lucene's idf, as the search index's (0 for a common word)."""
        df = self.df.get(term, 0)
        if df > self._common:
            return 0.0
        return math.log(1 + (self._n - df + 0.5) / (df + 0.5))

    def vector(self, tokens: Sequence[str]) -> dict[str, float]:
        """The BM25 weight of each term of one ticket (common words left out)."""
        norm = K1 * (1 - B + B * len(tokens) / self.avgdl)
        weights = {
            term: self.idf(term) * tf * (K1 + 1) / (tf + norm)
            for term, tf in Counter(tokens).items()
        }
        return {term: weight for term, weight in weights.items() if weight > 0}


def group(
    documents: Sequence[Document],
    reference: Sequence[Document] = (),
    threshold: float = THRESHOLD,
) -> Grouping:
    """Connected components of ``documents`` linked at cosine ``threshold`` or above.

    ``reference`` adds tickets that only teach the weights (how common each word is), such as
    the recent tickets that did get a lesson. Deterministic: groups and their members are in
    the order of ``documents``. Singletons are groups too.
    """
    token_lists = [tokens_of(document) for document in documents]
    weights = Weights(token_lists + [tokens_of(document) for document in reference])
    matrix, terms = _matrix(token_lists, weights)
    parent = list(range(len(documents)))
    for i, j in _linked(matrix, terms, weights, threshold):
        _union(parent, i, j)
    members: dict[int, list[int]] = {}
    for position in range(len(documents)):
        members.setdefault(_find(parent, position), []).append(position)
    groups = sorted(members.values(), key=lambda positions: positions[0])
    words = [
        telling_words(matrix, terms, positions, [documents[p] for p in positions])
        if len(positions) > 1
        else []
        for positions in groups
    ]
    return Grouping(groups=groups, words=words)


def _matrix(token_lists: list[list[str]], weights: Weights) -> tuple[sparse.csr_matrix, list[str]]:
    """Unit-length rows of BM25 weights, one per ticket, and the term of each column."""
    from scipy import sparse

    column: dict[str, int] = {}
    rows, cols, values = [], [], []
    for row, tokens in enumerate(token_lists):
        vector = weights.vector(tokens)
        length = math.sqrt(sum(value * value for value in vector.values())) or 1.0
        for term in sorted(vector):
            rows.append(row)
            cols.append(column.setdefault(term, len(column)))
            values.append(vector[term] / length)
    matrix = sparse.csr_matrix(
        (np.array(values, dtype=np.float64), (rows, cols)),
        shape=(len(token_lists), len(column)),
    )
    return matrix, list(column)


def _linked(
    matrix: sparse.csr_matrix, terms: list[str], weights: Weights, threshold: float
) -> list[tuple[int, int]]:
    """The pairs (i < j) whose cosine reaches ``threshold``, proposed by their rarer words."""
    from scipy import sparse

    if matrix.shape[0] < 2:
        return []
    limit = max(CANDIDATE_SHARE * weights.n, CANDIDATE_FLOOR)
    rare = np.array([weights.df[term] <= limit for term in terms], dtype=bool)
    rare_part = matrix[:, np.flatnonzero(rare)]
    # The cosine over the rare words, for every pair sharing one: an inverted index's join.
    shared = sparse.triu(rare_part @ rare_part.T, k=1).tocoo()
    if shared.nnz == 0:
        return []
    first, second = shared.row, shared.col
    common_part = matrix[:, np.flatnonzero(~rare)]
    # ... plus the common words' part, for those pairs only.
    common = np.asarray(common_part[first].multiply(common_part[second]).sum(axis=1)).ravel()
    cosine = shared.data + common
    keep = cosine >= threshold
    pairs = sorted(zip(first[keep].tolist(), second[keep].tolist(), strict=True))
    return [(int(i), int(j)) for i, j in pairs]


def telling_words(
    matrix: sparse.csr_matrix,
    terms: list[str],
    positions: list[int],
    documents: Sequence[Document],
    count: int = WORDS,
) -> list[str]:
    """A group's most telling words: the heaviest terms shared by at least two of its tickets,
    each shown as the word most often written for it (``timeouts`` for the stem ``timeout``)."""
    part = matrix[positions]
    weight = np.asarray(part.sum(axis=0)).ravel()
    spread = np.asarray((part > 0).sum(axis=0)).ravel()
    candidates = np.flatnonzero(spread >= 2)
    ranked = sorted(candidates.tolist(), key=lambda c: (-weight[c], terms[c]))
    chosen = [terms[c] for c in ranked[: count * 2]]
    written = _written_forms(chosen, documents)
    words: list[str] = []
    for term in chosen:
        word = written.get(term, term)
        # An identifier and its parts are separate terms; show a word once.
        if word not in words:
            words.append(word)
        if len(words) == count:
            break
    return words


def _written_forms(stems: list[str], documents: Sequence[Document]) -> dict[str, str]:
    """For each stem, the way the tickets most often write it (lower case)."""
    wanted = set(stems)
    seen: dict[str, Counter[str]] = {}
    for document in documents:
        for word in _WORD.findall(f"{document.title}\n{document.text}"):
            lowered = word.lower().strip(".-")
            found = tokenize(lowered)
            if len(found) == 1 and found[0] in wanted:
                seen.setdefault(found[0], Counter())[lowered] += 1
    return {
        stem: min(forms.items(), key=lambda item: (-item[1], len(item[0]), item[0]))[0]
        for stem, forms in seen.items()
    }


def _find(parent: list[int], item: int) -> int:
    while parent[item] != item:
        parent[item] = parent[parent[item]]  # path halving keeps the trees flat
        item = parent[item]
    return item


def _union(parent: list[int], a: int, b: int) -> None:
    root_a, root_b = _find(parent, a), _find(parent, b)
    if root_a != root_b:
        # The smaller position is the root: the result never depends on the order of links.
        parent[max(root_a, root_b)] = min(root_a, root_b)
