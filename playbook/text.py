"""Engineering text for retrieval: tickets as values, query synthesis, and the tokenizer."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import snowballstemmer

DESCRIPTION_CHARS = 500
# A ticket keeps at most this much text: Jira caps summaries at 255 characters and GitHub issue
# titles at 256, and GitHub caps bodies at 65,536. Anything longer did not come from them, and
# the bound keeps the work of parsing a forged ticket small.
SUMMARY_CHARS = 1_000
BODY_CHARS = 65_536
# How many times the summary and the labels count in a query: a summary is the
# reporter's own digest of the problem, and labels are chosen words, while a long
# description is mostly context. Repeating tokens is how BM25 weighs query terms.
SUMMARY_WEIGHT = 2
LABEL_WEIGHT = 2

# English stop words, plus the boilerplate of bug-report templates ("Steps to reproduce",
# "Expected result", "Version:"), which every report shares and so says nothing.
_STOP = """
    a about above after again against all also am an and any are aren as at be because been
    before being below between both but by can cannot could couldn did didn do does doesn doing
    don down during each else etc even ever every few for from further had hadn has hasn have
    haven having he her here hers herself him himself his how however i if in into is isn it
    its itself just let lets like ll may me might more most much must mustn my myself no nor
    not now of off on once one only or other ought our ours ourselves out over own per please
    re same seems shall shan she should shouldn since so some still such than that the their
    theirs them themselves then there these they this those through thus to too under until up
    upon us ve very via was wasn we were weren what when where whether which while who whom why
    will with within without won would wouldn yet you your yours yourself yourselves
"""
_TEMPLATE = "steps reproduce expected actual result version using following see attached"
STOP_WORDS = frozenset(_STOP.split()) | frozenset(_TEMPLATE.split())
# "fails", "failing" and "failure" are one idea; Snowball's English stemmer makes them one token.
_STEMMER = snowballstemmer.stemmer("english")
# A lesson's first line is its headline (a summary); it counts this many times.
HEADLINE_WEIGHT = 3

# The patterns below read untrusted text (ticket summaries and descriptions, PR bodies) and run
# in linear time: possessive quantifiers (`*+`, `++`) give back nothing the rest of a pattern
# could use; `^` under MULTILINE is followed by `[^\S\n]`, as `\s*` would read all the blank
# lines below from every line start; and a pattern whose closer may be missing also matches
# unclosed, to be given back unchanged (see `_unless_closed`).
#
# Jira wiki: {code:java}, {noformat}, {quote}, {panel:title=x}, {color:red} ... and Markdown fences.
_MACRO = re.compile(
    r"\{(?:code|noformat|quote|panel|color|html|info|note|tip|warning)(?::[^}]*+)?(?P<closed>\})?"
)
_FENCE = re.compile(r"^[^\S\n]*+(```|~~~)[\w+-]*+[^\S\n]*+$", re.MULTILINE)
_WIKI_HEADING = re.compile(r"^[^\S\n]*+h[1-6]\.\s*+", re.MULTILINE)
# [text|url] keeps the text. Linear as it is: no class reads past the next "[".
_WIKI_LINK = re.compile(r"\[([^\[\]|]*+)\|[^\[\]]*+\]")
# [text](url) keeps the text; an unclosed "[", or "[text]" with no "(url)", is given back.
_MD_LINK = re.compile(r"!?\[(?P<text>[^\]]*+)(?:\](?:\([^)]*+(?P<closed>\))?)?)?")
_HTML = re.compile(r"<[^>\n]{1,200}+>")  # bounded: each "<" reads at most 200 characters
_URL = re.compile(r"\b(?:https?|ftp|file)://\S++|\bwww\.\S++", re.IGNORECASE)
_ACCOUNT = re.compile(r"\[~[^\]]*+(?P<closed>\])?")  # Jira user mentions
# A raw token: word characters joined by the separators of identifiers, paths and dotted names.
_RAW = re.compile(r"[A-Za-z0-9_]++(?:[./:$#\\-][A-Za-z0-9_]++)*+")
_SEPARATORS = re.compile(r"[./:$#\\_-]+")
# Linear as it is: the first branch reads an upper-case run from its start, and a match (the
# first branch's or the third's) then takes the run, so no run is read from two starts.
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def _unless_closed(replacement: str) -> Callable[[re.Match[str]], str]:
    """A substitution: ``replacement`` for a match whose ``closed`` group matched, else the match.

    ``\\[~[^\\]]*\\]`` reads from an opener with no "]" after it to the end of the text, fails,
    and is tried again from the next opener: quadratic. With ``(?P<closed>\\])?`` instead it
    takes that stretch in one match and gives it back unchanged, as the failed match would have
    left it; no opener inside the stretch could match either, as each would read to the same end.
    """

    def substitute(match: re.Match[str]) -> str:
        return match.expand(replacement) if match.group("closed") else match.group(0)

    return substitute


_DROP_MACRO = _unless_closed(" ")
_DROP_ACCOUNT = _unless_closed(" ")
_MD_LINK_TEXT = _unless_closed(r"\g<text> ")


def strip_markup(text: str) -> str:
    """Drop Jira wiki and Markdown markup, URLs and mentions, keeping the words they wrap."""
    text = _MACRO.sub(_DROP_MACRO, text)
    text = _FENCE.sub(" ", text)
    text = _WIKI_HEADING.sub("", text)
    text = _ACCOUNT.sub(_DROP_ACCOUNT, text)
    text = _WIKI_LINK.sub(r"\1 ", text)
    text = _MD_LINK.sub(_MD_LINK_TEXT, text)
    text = _HTML.sub(" ", text)
    return _URL.sub(" ", text)


def _keep(token: str) -> bool:
    # Long digit runs are line numbers, ids and timestamps: noise for matching lessons.
    return len(token) > 1 and token not in STOP_WORDS and not (token.isdigit() and len(token) > 4)


def tokenize(text: str | None) -> list[str]:
    """Tokens of engineering text: lower-case words, identifiers whole and split into parts.

    ``getUserById`` gives getuserbyid, get, user, by, id (stop words then drop ``by``);
    ``org.apache.zookeeper.ClientCnxn`` keeps the dotted name and its parts, and
    ``ConnectionTimeoutException`` gives connection, timeout and exception too.
    """
    tokens: list[str] = []
    for raw in _RAW.findall(strip_markup(text or "")):
        pieces = [p for p in _SEPARATORS.split(raw) if p]
        parts = [w for piece in pieces for w in (_CAMEL.findall(piece) or [piece])]
        words = [p.lower() for p in parts]
        if len(parts) > 1:
            words.insert(0, raw.lower().strip("_"))
        tokens.extend(_stem(word) for word in words if _keep(word))
    return tokens


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _STEMMER.stemWord(word) if word.isalpha() else word


@dataclass(frozen=True)
class Ticket:
    """A ticket as retrieval sees it, whether from Jira, GitHub, the CLI or the API."""

    key: str | None
    summary: str
    description: str | None = None
    labels: tuple[str, ...] = field(default_factory=tuple)
    scope: str | None = None

    def __post_init__(self) -> None:
        # Every way of making a ticket (Jira, GitHub, the CLI, the API) passes through here.
        object.__setattr__(self, "summary", self.summary[:SUMMARY_CHARS])
        if self.description is not None:
            object.__setattr__(self, "description", self.description[:BODY_CHARS])

    @classmethod
    def from_jira(cls, issue: dict[str, Any]) -> Ticket:
        """From the ``issue`` object of a Jira REST v2 response or webhook."""
        fields = issue.get("fields") or {}
        labels = [str(label) for label in fields.get("labels") or []]
        components = [
            str(c.get("name")) for c in fields.get("components") or [] if isinstance(c, dict)
        ]
        project = (fields.get("project") or {}).get("key")
        key = issue.get("key")
        if not project and isinstance(key, str) and "-" in key:
            project = key.rsplit("-", 1)[0]
        return cls(
            key=key,
            summary=str(fields.get("summary") or ""),
            description=fields.get("description")
            if isinstance(fields.get("description"), str)
            else None,
            labels=tuple(labels + components),
            scope=project,
        )

    @classmethod
    def from_github(cls, issue: dict[str, Any], repo: str) -> Ticket:
        """From a GitHub issue object of a webhook or the REST API."""
        labels = [
            str(label.get("name")) if isinstance(label, dict) else str(label)
            for label in issue.get("labels") or []
        ]
        return cls(
            key=f"{repo}#{issue.get('number')}",
            summary=str(issue.get("title") or ""),
            description=issue.get("body") if isinstance(issue.get("body"), str) else None,
            labels=tuple(labels),
            scope=repo,
        )

    @classmethod
    def from_text(
        cls, text: str, labels: Sequence[str] = (), scope: str | None = None, key: str | None = None
    ) -> Ticket:
        """From free text (the CLI and the API): the first line is the summary."""
        summary, _, rest = text.strip().partition("\n")
        return cls(
            key=key, summary=summary, description=rest or None, labels=tuple(labels), scope=scope
        )


def synthesize_query(ticket: Ticket) -> str:
    """The query text: summary, the first 500 characters of the description, and labels.

    Long descriptions are cut because pasted logs and templates would drown the summary
    and labels, which say what the ticket is about.
    """
    description = (ticket.description or "")[:DESCRIPTION_CHARS]
    return "\n".join(
        part for part in (ticket.summary, description, " ".join(ticket.labels)) if part
    )


def query_tokens(ticket: Ticket) -> list[str]:
    """The tokens of :func:`synthesize_query`, with summary and labels weighted up."""
    description = (ticket.description or "")[:DESCRIPTION_CHARS]
    summary = tokenize(ticket.summary)
    labels = tokenize(" ".join(ticket.labels))
    # Each description word once: a pasted stack trace repeats the same frames, and
    # repetition in a query would make those frames outweigh the summary.
    once = list(dict.fromkeys(tokenize(description)))
    return summary * SUMMARY_WEIGHT + once + labels * LABEL_WEIGHT


def bullet_tokens(text: str, tags: Iterable[str] | None = ()) -> list[str]:
    """The tokens a bullet is indexed under: its text (headline weighted up) and its tags.

    When a lesson has several lines, the first is its headline, as a ticket's summary is,
    and counts ``HEADLINE_WEIGHT`` times.
    """
    headline, newline, rest = text.partition("\n")
    tags_tokens = tokenize(" ".join(tags or ()))
    if not newline:
        return tokenize(text) + tags_tokens
    return tokenize(headline) * HEADLINE_WEIGHT + tokenize(rest) + tags_tokens
