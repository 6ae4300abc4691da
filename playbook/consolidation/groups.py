"""Groups of lessons of one scope that say nearly the same thing, found by their own measure."""

from __future__ import annotations

import heapq
import itertools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from playbook.lessons.ids import sort_key
from playbook.search.text import tokenize

if TYPE_CHECKING:
    from scipy import sparse

# Measured with bench/consolidation_groups.py: planted paraphrases of one instruction against
# distinct instructions that share a team's boilerplate sentences (see the README).
THRESHOLD = 0.5
MAX_SIZE = 8
# Pseudo-lessons added to the scope when weighing words: in a scope of three lessons a word that
# two share is no boilerplate yet, while in a scope of 2,000 one that 1,800 share weighs next to
# nothing. The IDF is log((n + PRIOR) / (df + 1)).
PRIOR = 10
# A pair of consecutive words counts this much beside the single words: word order separates
# "retry the upload before the cleanup" from "clean up before retrying the upload".
BIGRAM_WEIGHT = 0.25
# Ticket keys and lesson ids (CTMS-4337, pb-12) and bare numbers say where a lesson came from,
# not what it says: two paraphrases learned from different tickets must still meet.
_PROVENANCE = re.compile(r"[0-9]++")
_KEY = re.compile(
    r"(?<![\w-])(?:[A-Za-z][A-Za-z0-9_]*+-[0-9]++|[\w.-]++/[\w.-]++#[0-9]++)(?![\w-])|#[0-9]++"
)


@dataclass(frozen=True)
class Group:
    """Lessons to merge (ids in id order) and their average pairwise similarity."""

    member_ids: tuple[str, ...]
    similarity: float


def terms(text: str) -> list[str]:
    """The stemmed words a lesson is compared by: `tokenize`, without ids and numbers."""
    return [token for token in tokenize(_KEY.sub(" ", text)) if not _PROVENANCE.fullmatch(token)]


def _features(tokens: Sequence[str]) -> list[str]:
    """Single words, and consecutive pairs marked with a space (no token holds one)."""
    return [*tokens, *(f"{a} {b}" for a, b in itertools.pairwise(tokens))]


def vectors(texts: Sequence[str], bigram_weight: float = BIGRAM_WEIGHT) -> sparse.csr_matrix:
    """Unit-length TF-IDF rows of ``texts``, the IDF taken over ``texts`` themselves.

    Term frequency is sublinear (1 + log tf) so a word said twice is not twice the lesson;
    a word most lessons of the scope share (its boilerplate) gets an IDF near zero.
    """
    from scipy import sparse  # loaded by a consolidation run, not by every process that stores one

    vocabulary: dict[str, int] = {}
    rows, cols, values = [], [], []
    for row, text in enumerate(texts):
        counts: dict[int, float] = {}
        for feature in _features(terms(text)) if bigram_weight else terms(text):
            column = vocabulary.setdefault(feature, len(vocabulary))
            counts[column] = counts.get(column, 0.0) + 1.0
        rows.extend([row] * len(counts))
        cols.extend(counts)
        values.extend(counts.values())
    shape = (len(texts), max(len(vocabulary), 1))
    matrix = sparse.csr_matrix(
        (np.asarray(values, dtype=np.float64), (rows, cols)), shape=shape, dtype=np.float64
    )
    matrix.data = 1.0 + np.log(matrix.data)
    df = np.bincount(matrix.indices, minlength=shape[1])
    idf = np.log((len(texts) + PRIOR) / (df + 1.0))
    if bigram_weight and bigram_weight != 1.0:
        is_pair = np.zeros(shape[1], dtype=bool)
        for feature, column in vocabulary.items():
            is_pair[column] = " " in feature
        idf = np.where(is_pair, idf * bigram_weight, idf)
    matrix = matrix @ sparse.diags(idf)
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    return sparse.csr_matrix(sparse.diags(1.0 / norms) @ matrix)


def similarities(texts: Sequence[str], bigram_weight: float = BIGRAM_WEIGHT) -> np.ndarray:
    """The full matrix of pairwise similarities of ``texts`` (for benches and tests)."""
    matrix = vectors(texts, bigram_weight)
    return np.asarray((matrix @ matrix.T).todense())


def find_groups(
    lessons: Sequence[tuple[str, str]],
    *,
    threshold: float = THRESHOLD,
    max_size: int = MAX_SIZE,
    bigram_weight: float = BIGRAM_WEIGHT,
) -> list[Group]:
    """Groups of ``lessons`` ((id, text) pairs of one scope) worth merging, most similar first.

    Average-link agglomeration: the two clusters whose average pairwise similarity is highest
    are joined while it is at least ``threshold`` and the result has at most ``max_size``
    lessons, so every group is cohesive as a whole (no chain of lessons each like the next
    and the ends unlike). Only lessons joined to another by a pair at the threshold can end
    up together, so the work is done per connected component of those pairs.
    """
    from scipy.sparse.csgraph import connected_components

    ordered = sorted(dict(lessons).items(), key=lambda item: sort_key(item[0]))
    if len(ordered) < 2 or max_size < 2:
        return []
    ids = [bullet_id for bullet_id, _ in ordered]
    matrix = vectors([text for _, text in ordered], bigram_weight)
    pairs = (matrix @ matrix.T).tocsr()
    pairs.setdiag(0)
    pairs.data[pairs.data < threshold] = 0
    pairs.eliminate_zeros()
    count, labels = connected_components(pairs, directed=False)
    sizes = np.bincount(labels, minlength=count)
    groups: list[Group] = []
    for component in np.flatnonzero(sizes > 1):
        members = np.flatnonzero(labels == component)
        block = matrix[members]
        dense = np.asarray((block @ block.T).todense())
        for cluster in _average_link(dense, threshold, max_size):
            chosen = [int(members[i]) for i in cluster]
            group_ids = tuple(sorted((ids[i] for i in chosen), key=sort_key))
            groups.append(Group(group_ids, round(_mean_pairwise(dense, cluster), 4)))
    return sorted(groups, key=lambda g: (-g.similarity, sort_key(g.member_ids[0])))


def _average_link(similar: np.ndarray, threshold: float, max_size: int) -> list[list[int]]:
    """Clusters (of at least two) of a dense similarity block, by average-link merging.

    A heap of the cluster pairs at the threshold, stale entries skipped by version: two
    clusters can average ``threshold`` only if some pair of their members reaches it, so
    after a merge only the neighbours of the two merged clusters are measured again.
    """
    size = similar.shape[0]
    clusters: dict[int, list[int]] = {i: [i] for i in range(size)}
    version = [0] * size
    near: dict[int, set[int]] = {i: set() for i in range(size)}
    heap: list[tuple[float, int, int, int, int]] = []
    rows, cols = np.nonzero(np.triu(similar >= threshold, k=1))
    for a, b in zip(rows.tolist(), cols.tolist(), strict=True):
        near[a].add(b)
        near[b].add(a)
        heap.append((-float(similar[a, b]), a, b, 0, 0))
    heapq.heapify(heap)
    while heap:
        _, a, b, seen_a, seen_b = heapq.heappop(heap)
        if a not in clusters or b not in clusters or (version[a], version[b]) != (seen_a, seen_b):
            continue
        clusters[a].extend(clusters.pop(b))
        version[a] += 1
        near[a] = (near[a] | near.pop(b)) - {a, b}
        for c in sorted(near[a]):
            near[c].discard(b)
            near[c].add(a)
            if len(clusters[a]) + len(clusters[c]) > max_size:
                continue  # clusters only grow: this pair never fits again
            average = float(similar[np.ix_(clusters[a], clusters[c])].mean())
            if average >= threshold:
                first, second = min(a, c), max(a, c)
                heapq.heappush(heap, (-average, first, second, version[first], version[second]))
    return [sorted(members) for members in clusters.values() if len(members) > 1]


def _mean_pairwise(similar: np.ndarray, cluster: Iterable[int]) -> float:
    """The average similarity of the distinct pairs of ``cluster``."""
    members = list(cluster)
    block = similar[np.ix_(members, members)]
    pairs = len(members) * (len(members) - 1)
    return float((block.sum() - np.trace(block)) / pairs) if pairs else 0.0


def common_terms(texts: Sequence[str], share: float = 0.5, min_lessons: int = 10) -> set[str]:
    """The stemmed words in more than ``share`` of ``texts``: a scope's boilerplate.

    Empty for fewer than ``min_lessons`` texts, where a shared word says nothing yet.
    """
    if len(texts) < min_lessons:
        return set()
    seen: dict[str, int] = {}
    for text in texts:
        for term in set(terms(text)):
            seen[term] = seen.get(term, 0) + 1
    limit = math.floor(share * len(texts))
    return {term for term, count in seen.items() if count > limit}
