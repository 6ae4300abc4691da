"""Rules in review feedback: the sentences of a reviewer that say how work should be done.

A heuristic, for a team without a model: each sentence of the reviewer's own prose (quotes, code
and mentions left out, see `prose`) is read word by word for a cue that it prescribes or forbids
a practice ("always", "never", "don't", "avoid", "prefer", "make sure", "must", "should",
"instead of", an imperative such as "use X"). What counts, decided once and used for the labelled
set in tests/data/review_sentences.jsonl:

- a rule names a practice someone could follow again, even when said about one line ("use the
  v2 client here, v1 drops retries");
- a one-off edit is no rule ("rename this", "fix the typo", "please rebase");
- a question is a rule only when it asks for a practice: a request ("could you use X?", "can we
  avoid X?") or a rhetorical negative ("shouldn't this use X?", "why not X?"); an open question
  ("should we cache this?", "why is this needed?") is not;
- approvals, thanks, bug reports and explanations without a prescription are not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from playbook.reviews import prose

MIN_RULE_CHARS = 12
# A lesson is a sentence or two; a longer "sentence" is a pasted log or a wall of text, and a
# clipped one would misquote the reviewer, so it is left out rather than cut.
MAX_RULE_CHARS = 300
# Quotes a model returns must be at least this long to count as found: "the" is in everything.
MIN_QUOTE_CHARS = 12

# Lower-case words of a sentence, inline code replaced by one placeholder so that `always_retry`
# or `never()` in code is no cue. Linear: one class, no nesting.
_WORD = re.compile(r"[a-z0-9']+")
_CODE = re.compile(r"`[^`]*+`")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'"})

# Words that prescribe wherever they stand (with the guards below).
_MODALS = frozenset({"must", "mustn't", "should", "shouldn't", "shall"})
_OBLIGED = frozenset({"need", "needs", "has", "have"})  # followed by "to"
_BANNED = frozenset({"banned", "forbidden", "mandatory", "required", "disallowed"})
# "always" and "never" prescribe at the start of a clause or after a subject that is the team or
# the reader ("we never merge"); after "this" or "it" they describe ("this always returns True").
_ALWAYS_AFTER = frozenset(
    {"we", "you", "please", "should", "must", "to", "and", "so", "let's", "then", "shall", "we'd"}
)
# "we always seem to", "never mind": habits and idioms, not instructions.
_HABITS = frozenset({"mind", "seem", "seems", "forget", "forgets", "end", "get", "gets"})
# After "don't": a feeling or a thought, not an instruction.
_NOT_INSTRUCTIONS = frozenset(
    {"worry", "mind", "know", "think", "see", "understand", "care", "remember", "believe", "get"}
)
# A clause "not ..." that is no contrast ("not sure", "not a blocker").
_NOT_A_CONTRAST = frozenset(
    {"", "sure", "a", "an", "convinced", "yet", "really", "needed", "necessary", "blocking", "that"}
)
# "should" / "must" followed by these predicts or infers ("should be fine", "must have rebased").
_PREDICTIONS = frozenset({"work", "pass", "now", "fix", "have", "help", "do"})
_PREDICTED = frozenset({"fine", "ok", "okay", "good", "enough", "done", "possible", "safe"})
# Imperatives that state a practice when they open a clause.
_PRACTICE_WORDS = """
    use add avoid prefer keep wrap pass put move validate check log return raise handle pin
    make ensure bound limit parse read call close commit cache escape sanitize stop run sort
    switch page load order compare guard catch hash store write follow include freeze poll
    extract document test name mark treat consider iterate emit be quote redact retry batch lock
    inject reuse initialise initialize import type annotate prefix normalise normalize default cap
"""
_PRACTICE_VERBS = frozenset(_PRACTICE_WORDS.split())
# Imperatives of a one-off edit: no rule unless another cue says so.
_EDIT_WORDS = """
    rename fix remove delete rebase update bump resolve revert squash split drop undo merge change
    reword rephrase
"""
_EDIT_VERBS = frozenset(_EDIT_WORDS.split())
# Words before an imperative that leave it one: "so keep", "next time please add".
_FILLERS = frozenset(
    {"please", "so", "and", "then", "just", "maybe", "also", "next", "time", "going", "forward"}
)
_REQUESTS = (
    ("could", "you"),
    ("can", "you"),
    ("would", "you"),
    ("can", "we"),
    ("could", "we"),
    ("will", "you"),
    ("can", "this"),
    ("could", "this"),
    ("what", "about"),
    ("how", "about"),
)
# Openers of a question asking for a practice whatever verb follows.
_SUGGESTING = (("would", "it", "make", "sense", "to"), ("is", "it", "worth"))
# Openers that carry no meaning of the rule; dropped from the start of the proposal's text.
_POLITE = re.compile(
    r"(?:nit|nitpick|minor|blocking|suggestion|small request|one thing|for next time|"
    r"going forward|non-blocking|optional|note|also|btw|imo|imho|fwiw|heads up|careful|"
    r"requesting changes|changes requested|blocking on this|for the record|small thing|"
    r"one rule though|one thing though)"
    r"(?:[ \t]*+\([^()\n]{0,40}\))?[ \t]*+[:,\-\u2013\u2014][ \t]*+",
    re.IGNORECASE,
)
_SOFTENERS = re.compile(
    r"(?:please|kindly|i think|i'd say|i would say|i feel like|i believe|honestly|generally)"
    r"(?:[ \t]*+,)?[ \t]++",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Rule:
    """A rule a reviewer gave: the proposal's text, the reviewer's words it rests on, the cue."""

    text: str  # lesson-sized, politeness and "nit:" dropped, one line
    quote: str  # the sentence as the reviewer wrote it (Markdown markup dropped)
    cue: str  # the word or phrase that made it a rule, for `--explain`-style display


def _words(sentence: str) -> list[str]:
    """The sentence's lower-case words, inline code as one ``code`` word."""
    blanked = _CODE.sub(" code ", sentence.translate(_APOSTROPHES).lower())
    return _WORD.findall(blanked.replace("do not", "don't").replace("dont ", "don't "))


def _clauses(sentence: str) -> list[list[str]]:
    """The sentence's clauses (cut at , ; : and dashes), each as its words."""
    text = sentence.translate(_APOSTROPHES)
    for mark in (";", ":", " - ", "\u2013", "\u2014", ","):
        text = text.replace(mark, "\n")
    return [words for part in text.split("\n") if (words := _words(part))]


def _guarded_cue(words: list[str], at: int) -> str | None:
    """The cue the word at ``at`` gives, if its neighbours let it prescribe."""
    word = words[at]
    before = words[at - 1] if at else ""
    after = words[at + 1] if at + 1 < len(words) else ""
    after2 = words[at + 2] if at + 2 < len(words) else ""
    if word in _MODALS:
        if before == "i" or after in _PREDICTIONS or (after == "be" and after2 in _PREDICTED):
            return None
        return word
    if word in ("always", "never"):
        if after in _HABITS or (at and before not in _ALWAYS_AFTER):
            return None
        return word
    if word == "don't":
        if before == "i" or after in _NOT_INSTRUCTIONS:
            return None
        return "don't"
    if word in _OBLIGED and after == "to" and before not in ("i", "i'll", "you'll"):
        return f"{word} to"
    if word in ("need", "needs") and after in ("a", "an") and before != "i":
        return f"{word} {after}"
    if (word == "avoid" and before != "i") or word in _BANNED:
        return word
    if word == "prefer" and before != "i":
        return word
    if word == "instead" or (word == "rather" and after == "than"):
        return "instead" if word == "instead" else "rather than"
    if word in ("make", "be") and after == "sure":
        return f"{word} sure"
    if word == "ensure" or (word == "remember" and after == "to"):
        return word
    if word in ("better", "cleaner", "safer", "simpler") and after == "to":
        return f"{word} to"
    if word == "want" and after == "to" and before in ("you'll", "you'd", "we'll", "we'd"):
        return "want to"
    if word in ("rather", "let's") and after == "not":
        return f"{word} not"
    if word == "worth" and after.endswith("ing"):
        return "worth"
    if word == "not" and at == 0 and after not in _NOT_A_CONTRAST:
        return "not"  # the second half of "X, not Y": "tabs, not spaces"
    if word == "convention" or (word == "style" and after == "guide"):
        return word
    if word == "we" and after in ("keep", "use", "put", "prefer", "avoid", "write", "pin"):
        return f"we {after}"
    return None


def _imperative(words: list[str]) -> str | None:
    """The practice verb opening a clause ("use X", "let's keep", "please add"), if any."""
    start = 0
    while start < len(words) and words[start] in _FILLERS:
        start += 1
    if start < len(words) and words[start] == "let's":
        start += 1
    if start >= len(words):
        return None
    verb = words[start]
    if verb in _PRACTICE_VERBS and "is" not in words[start + 1 : start + 3]:
        if words[start + 1 : start + 3] == ["it", "as"]:  # "keep it as is"
            return None
        return verb
    if start and words[start - 1] == "please" and verb not in _EDIT_VERBS:
        return f"please {verb}"
    return None


def cue_of(sentence: str) -> str | None:
    """The word or phrase that makes the sentence a rule, or None when it gives none."""
    question = sentence.rstrip(" *_)\"'").endswith("?")
    clauses = _clauses(sentence)
    if not clauses:
        return None
    if question:
        for words in clauses:
            first_two = tuple(words[:2])
            if words[0] in ("shouldn't", "wouldn't") or first_two == ("why", "not"):
                return " ".join(words[:2])
            for opener in _SUGGESTING:
                if tuple(words[: len(opener)]) == opener:
                    return " ".join(opener)
            if first_two in _REQUESTS:
                rest = words[2:]
                if rest[:1] == ["please"]:
                    rest = rest[1:]
                if rest[:1] == ["mind"]:
                    rest = rest[1:]
                verb = rest[0] if rest else ""
                stem = verb[:-3] if verb.endswith("ing") else verb
                if rest[1:2] in (["me"], ["us"]):  # "can you add me as a reviewer"
                    continue
                if verb in _PRACTICE_VERBS or stem in _PRACTICE_VERBS or verb == "avoid":
                    return f"{' '.join(first_two)} {verb}"
                if verb not in _EDIT_VERBS and any(
                    _guarded_cue(rest, i) in ("instead", "rather than") for i in range(len(rest))
                ):
                    return "instead"
        return None
    for words in clauses:
        for at in range(len(words)):
            if cue := _guarded_cue(words, at):
                return cue
    for words in clauses:
        if cue := _imperative(words):
            return cue
    if clauses[-1] == ["please"] and len(clauses) > 1:  # "Timeouts on every call, please."
        return "please"
    return None


def _lesson_text(sentence: str) -> str:
    """The sentence as a proposal: openers like "nit:" and "please" dropped, first letter up."""
    text = sentence
    for _ in range(3):  # "Nit: IMO, please ..." has a few openers, never many
        opener = _POLITE.match(text) or _SOFTENERS.match(text)
        if not opener:
            break
        text = text[opener.end() :]
    return text[:1].upper() + text[1:]


def rules_in(feedback: str | None) -> list[Rule]:
    """The rules in one piece of review feedback (a review, a line comment, a comment), in order.

    Each sentence of the reviewer's own prose that gives a rule, between `MIN_RULE_CHARS` and
    `MAX_RULE_CHARS` long; a sentence given twice in one piece of feedback is one rule.
    """
    found: list[Rule] = []
    seen: set[str] = set()
    for sentence in prose.sentences_in(feedback):
        text = _lesson_text(sentence)
        if not MIN_RULE_CHARS <= len(text) <= MAX_RULE_CHARS:
            continue
        cue = cue_of(sentence)
        key = _normalised(text)
        if cue and key not in seen:
            seen.add(key)
            found.append(Rule(text=text, quote=sentence, cue=cue))
    return found


def _normalised(text: str) -> str:
    """Text compared for a quote: case, whitespace, quote marks and emphasis markers evened out."""
    text = text.translate(_APOSTROPHES).replace("\u201c", '"').replace("\u201d", '"')
    text = text.replace("`", "").replace("*", "").replace("~", "")
    return " ".join(text.casefold().split()).strip(" .,;:!?\"'")


def quote_found(quote: str, feedback: str | None) -> bool:
    """Whether the quote is the reviewer's words: found in the feedback, markup and case aside.

    For a model's lesson, which must rest on words the reviewer wrote; a quote shorter than
    `MIN_QUOTE_CHARS` once evened out is never found, as it would match any feedback.
    """
    wanted = _normalised(prose.plain_text(quote))
    if len(wanted) < MIN_QUOTE_CHARS:
        return False
    return wanted in _normalised(prose.plain_text(feedback))
