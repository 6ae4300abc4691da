"""Relevance estimate: a calibrated probability that a ranked lesson fits its ticket."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from playbook.search.index import K1
from playbook.search.ranking import FRESHNESS_FLOOR, FRESHNESS_HALF_LIFE_DAYS
from playbook.search.text import Ticket, bullet_tokens, query_tokens, tokenize

MODEL_VERSION = 1
MODEL_FILE = "relevance_model.json"

# Every feature the extractor can compute, in a fixed order; the model file names the ones it uses.
FEATURES = (
    "bm25_norm",  # the text match over the best a lesson could score for this ticket
    "log_bm25",  # the raw text match: long tickets score high everywhere, hence the norm above
    "idf_coverage",  # share of the ticket's idf mass (distinct terms) the lesson matches
    "rare_share",  # share of the ticket's rarest third of terms the lesson matches
    "summary_coverage",  # share of the summary's idf mass (distinct terms) the lesson matches
    "lesson_coverage",  # share of the lesson's distinct terms the ticket has: short lessons fit
    "identifiers",  # identifiers (class names, paths, a.b.c keys, codes) both share, log1p
    "tag_match",  # a label or component in common
    "rank_recip",  # 1 / rank
    "top_ratio",  # this lesson's text match over the first one's
    "gap_next",  # drop to the next lesson's text match, over the first one's
    "lesson_length",  # log of the lesson's token count: long lessons match everything a little
    "freshness",  # the ranking's fade since the lesson last changed or was cited (age)
    "idle_days",  # the same age in log days (read back from the fade): links are mostly recent
    "query_length",  # log of the ticket's query token count: long tickets match everything
)

# A word with an inner capital (ClassName, getFoo), a path with a slash, a dotted key of three
# or more parts (a.b.c, also file.name.ext), or a code of capitals and digits (ORA-00942,
# E1234): words a ticket and a lesson share by chance far less often than prose.
_IDENTIFIER = re.compile(
    r"\b[A-Z]{1,6}-?\d{3,}\b"
    r"|(?:[\w.-]+/)+[\w.-]+"
    r"|\b[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*){2,}\b"
    r"|\b[A-Za-z_]*[a-z][a-z0-9_]*[A-Z][A-Za-z0-9_]*\b"
)
_IDENTIFIER_CHARS = 2_000  # what of each text is read for identifiers: the part searched


class ModelError(ValueError):
    """The coefficients file is missing, unreadable, or not in the shape this version reads."""


@dataclass(frozen=True)
class Model:
    """A logistic model over named features, standardised by means and scales."""

    version: int
    features: tuple[str, ...]
    means: tuple[float, ...]
    scales: tuple[float, ...]
    coefficients: tuple[float, ...]
    intercept: float
    meta: Mapping[str, Any]

    @property
    def floor(self) -> float:
        """The comment floor the bench chose for this model (0 when the file names none)."""
        return float(self.meta.get("floor", 0.0))

    @property
    def lesson_ratio(self) -> float:
        """The lessons' floor as a share of the comment's (1 when the file names none)."""
        floor = self.floor
        return float(self.meta.get("lesson_floor", floor)) / floor if floor > 0 else 1.0

    @property
    def strong(self) -> float:
        """From this estimate on, a fit reads "strong" (the top of the bench's calibration)."""
        return float(self.meta.get("strong", 0.1))

    def probability(self, features: Mapping[str, float]) -> float:
        """The probability the lesson is relevant, from its features (a dot product, a logistic)."""
        z = self.intercept
        for name, mean, scale, coef in zip(
            self.features, self.means, self.scales, self.coefficients, strict=True
        ):
            z += coef * (features[name] - mean) / scale
        # Written to stay finite at either extreme instead of overflowing exp.
        if z >= 0:
            return 1.0 / (1.0 + math.exp(-z))
        e = math.exp(z)
        return e / (1.0 + e)


def identifiers(text: str) -> set[str]:
    """The identifier-like words of a text (case kept: a class name is spelled one way)."""
    return {m.group(0).strip(".-/") for m in _IDENTIFIER.finditer(text[:_IDENTIFIER_CHARS])}


def extract(
    ticket: Ticket,
    hits: Sequence[Any],
    idf: Mapping[str, float],
    tokens: Sequence[str] | None = None,
    only: Collection[str] | None = None,
) -> list[dict[str, float]]:
    """The features of each ranked hit for ``ticket`` (best first), from what the search has.

    ``hits`` need ``bm25``, ``text``, ``tags``, ``freshness`` (as `retrieval.Hit` has);
    ``idf`` maps the ticket's query tokens to their idf in the index searched
    (`Retriever.idfs`); ``tokens``, the query's tokens when the search has them at hand
    (``SearchResult.query.split()``), saves tokenizing the ticket again. With ``only`` (the
    model's features), the costly ones it does not use (identifiers, tags) read as 0. Pure: no
    database.
    """
    if not hits:
        return []
    if tokens is None:
        tokens = query_tokens(ticket)
    # The most a lesson could score: every query token at its idf's ceiling under BM25.
    ceiling = sum(idf.get(t, 0.0) for t in tokens) * (K1 + 1) or 1.0
    distinct = {t: idf.get(t, 0.0) for t in dict.fromkeys(tokens)}
    mass = sum(distinct.values()) or 1.0
    by_idf = sorted(distinct, key=lambda t: (-distinct[t], t))
    rare = set(by_idf[: max(1, math.ceil(len(by_idf) / 3))]) if by_idf else set()
    want = set(FEATURES if only is None else only)
    ticket_ids = (
        identifiers(f"{ticket.summary}\n{ticket.description or ''}")
        if "identifiers" in want
        else set()
    )
    headline = {t: idf.get(t, 0.0) for t in dict.fromkeys(tokenize(ticket.summary)) if t in idf}
    headline_mass = sum(headline.values()) or 1.0
    asked = set(tokens)
    ticket_tags = set(tokenize(" ".join(ticket.labels))) if "tag_match" in want else set()
    top = max(hits[0].bm25, 1e-9)
    query_length = math.log1p(len(tokens))
    rows = []
    for i, hit in enumerate(hits):
        have, length = _lesson_terms(hit.text, tuple(hit.tags))
        matched = [t for t in distinct if t in have]
        shared_ids = ticket_ids & _lesson_ids(hit.text) if ticket_ids else set()
        lesson_tags = _tag_terms(tuple(hit.tags)) if ticket_tags else frozenset()
        following = hits[i + 1].bm25 if i + 1 < len(hits) else 0.0
        rows.append(
            {
                "bm25_norm": hit.bm25 / ceiling,
                "log_bm25": math.log1p(max(hit.bm25, 0.0)),
                "idf_coverage": sum(distinct[t] for t in matched) / mass,
                "rare_share": sum(1 for t in rare if t in have) / (len(rare) or 1),
                "summary_coverage": sum(v for t, v in headline.items() if t in have)
                / headline_mass,
                "lesson_coverage": sum(1 for t in have if t in asked) / (len(have) or 1),
                "identifiers": math.log1p(len(shared_ids)),
                "tag_match": 1.0 if ticket_tags & lesson_tags else 0.0,
                "rank_recip": 1.0 / (i + 1),
                "top_ratio": hit.bm25 / top,
                "gap_next": (hit.bm25 - following) / top,
                "lesson_length": math.log1p(length),
                "freshness": float(hit.freshness),
                "idle_days": _idle_days(float(hit.freshness)),
                "query_length": query_length,
            }
        )
    return rows


# A word as a reader sees it: letters and digits (possessive: no backtracking on any text).
_SURFACE = re.compile(r"[^\W_]++")
_SURFACE_CHARS = 2_000  # the part of the ticket the search reads (summary, description start)
MATCHED_WORDS = 3  # at most this many words in a reason line


@lru_cache(maxsize=16384)
def _word_tokens(word: str) -> frozenset[str]:
    return frozenset(tokenize(word))


# A ticket's words by the terms they stand for, read once per search: (place, word, terms).
TicketWords = dict[str, list[tuple[int, str, frozenset[str]]]]


def ticket_words(ticket: Ticket) -> TicketWords:
    """The ticket's words as written (summary, description start), indexed by their terms.

    Read once per search, so each lesson's matched words are a lookup of its terms.
    """
    source = f"{ticket.summary}\n{ticket.description or ''}"[:_SURFACE_CHARS]
    by_term: TicketWords = {}
    seen: set[frozenset[str]] = set()
    for order, match in enumerate(_SURFACE.finditer(source)):
        word = match.group(0)
        terms = _word_tokens(word)
        if not terms or terms in seen:
            continue  # "Order" after "order": the first spelling stands for both
        seen.add(terms)
        for term in terms:
            by_term.setdefault(term, []).append((order, word, terms))
    return by_term


def matched_words(
    ticket: Ticket,
    text: str,
    tags: Sequence[str],
    idf: Mapping[str, float],
    limit: int = MATCHED_WORDS,
    words: TicketWords | None = None,
) -> tuple[str, ...]:
    """The ticket's words (as written there) the lesson matches, rarest first, at most ``limit``.

    What a reader checks a lesson's reason against: "matched *deadlock*, *orders*" says why it
    is here in the ticket's own words, not in stems. ``words``: `ticket_words(ticket)`, when
    the search has it at hand.
    """
    if words is None:
        words = ticket_words(ticket)
    have = _lesson_terms(text, tuple(tags))[0]
    entries = sorted({entry for term in words.keys() & have for entry in words[term]})
    # Keyed by the terms matched: "order" and "orders" are one match, shown as first written.
    found: dict[frozenset[str], tuple[float, int, str]] = {}
    for order, word, terms in entries:
        key = terms & have
        if key not in found:
            found[key] = (-max(idf.get(t, 0.0) for t in key), order, word)
    return tuple(word for _, _, word in sorted(found.values())[:limit])


def strength(p: float, lesson_floor: float, model: Model | None = None) -> str:
    """The fit in words: "strong", "possible", or "weak" (below the lessons' floor)."""
    model = model or default_model()
    if p >= model.strong:
        return "strong"
    return "possible" if p >= lesson_floor else "weak"


def fit_words(p: float, matched: Sequence[str], lesson_floor: float) -> str:
    """A lesson's fit in words with the words it matched: ``possible fit: matched deadlock``."""
    words = strength(p, lesson_floor)
    return f"{words} fit: matched {', '.join(matched)}" if matched else f"{words} fit"


def _idle_days(fresh: float) -> float:
    """log1p of the idle days a freshness stands for (`ranking.faded` inverted)."""
    part = (fresh - FRESHNESS_FLOOR) / (1 - FRESHNESS_FLOOR)
    if part >= 1.0:
        return 0.0
    if part <= 0.0:  # faded all the way (or freshness is off): as old as it can read
        return math.log1p(FRESHNESS_HALF_LIFE_DAYS * 20)
    return math.log1p(-FRESHNESS_HALF_LIFE_DAYS * math.log2(part))


# The same lessons come back search after search: their terms are read once per text.
@lru_cache(maxsize=4096)
def _lesson_terms(text: str, tags: tuple[str, ...]) -> tuple[frozenset[str], int]:
    """A lesson's indexed terms and their count."""
    words = bullet_tokens(text, tags)
    return frozenset(words), len(words)


@lru_cache(maxsize=4096)
def _lesson_ids(text: str) -> frozenset[str]:
    return frozenset(identifiers(text))


@lru_cache(maxsize=1024)
def _tag_terms(tags: tuple[str, ...]) -> frozenset[str]:
    return frozenset(tokenize(" ".join(tags)))


def parse_model(data: Any, where: str = "relevance model") -> Model:
    """A model from the coefficients file's JSON; a clear ModelError when it is not one."""
    try:
        if data.get("version") != MODEL_VERSION:
            raise ModelError(f"{where}: version {data.get('version')!r}, expected {MODEL_VERSION}")
        names = tuple(str(n) for n in data["features"])
        unknown = [n for n in names if n not in FEATURES]
        if unknown:
            raise ModelError(f"{where}: unknown features {', '.join(unknown)}")
        numbers = [tuple(float(x) for x in data[k]) for k in ("means", "scales", "coefficients")]
        if any(len(v) != len(names) for v in numbers):
            raise ModelError(f"{where}: means, scales and coefficients must match the features")
        if any(s <= 0 or not math.isfinite(s) for s in numbers[1]):
            raise ModelError(f"{where}: every scale must be a positive number")
        intercept = float(data["intercept"])
        if not all(math.isfinite(x) for v in numbers for x in v) or not math.isfinite(intercept):
            raise ModelError(f"{where}: every number must be finite")
    except ModelError:
        raise
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise ModelError(
            f"{where}: not a relevance model ({type(error).__name__}: {error})"
        ) from error
    meta = {
        k: v for k, v in data.items() if k not in {"features", "means", "scales", "coefficients"}
    }
    return Model(MODEL_VERSION, names, *numbers, intercept, meta)  # type: ignore[arg-type]


def load_model(path: str | Path | None = None) -> Model:
    """The coefficients file at ``path``, else the one packaged; ModelError if unusable."""
    try:
        if path is None:
            raw = resources.files("playbook.search").joinpath(MODEL_FILE).read_text("utf-8")
            where = f"packaged {MODEL_FILE}"
        else:
            raw = Path(path).read_text("utf-8")
            where = str(path)
    except OSError as error:
        raise ModelError(f"relevance model {path or MODEL_FILE}: cannot read ({error})") from error
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ModelError(f"{where}: not JSON ({error})") from error
    return parse_model(data, where)


@lru_cache(maxsize=1)
def default_model() -> Model:
    """The packaged model, read once per process."""
    return load_model()


def shifted(p: float, shift: float) -> float:
    """``p`` with ``shift`` added to its log-odds (a scope's recalibration; 0 changes nothing)."""
    if shift == 0.0 or p <= 0.0 or p >= 1.0:
        return p
    z = math.log(p / (1.0 - p)) + shift
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def probability(features: Mapping[str, float], model: Model | None = None) -> float:
    """The probability a lesson with these features is relevant (packaged model by default)."""
    return (model or default_model()).probability(features)
