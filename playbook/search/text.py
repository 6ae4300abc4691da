"""Engineering text for retrieval: tickets as values, query synthesis, and the tokenizer."""

from __future__ import annotations

import itertools
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any

import snowballstemmer

# Bumped whenever the tokens of some text change: tokens stored under another version (a
# persisted index) were made by other rules and must be made again, not compared.
TOKENIZER_VERSION = 2
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
# The function words of other languages, which two texts share whatever they are about. Those in
# Latin letters also reach English text; the list leaves out every one that means something
# there ("die", "le" for leader election, "des", "du", "se", "el", "del", "ses", "en"), and the
# rest ("de-serialize", "ls -la") are noise in English too.
_STOP_ABROAD = """
    de la les une et dans pour avec sur pas que qui quand lorsque mais sont être été ils elle
    elles nous vous leur leurs très chaque peut doit faut comme lors cette ces aux
    der das und ist nicht mit den dem ein eine einen einem einer zu zum zur auf für von vom
    sich wird werden bei beim nach oder wenn sind wir ihr auch noch nur dass kann muss soll
    wie aus als unter durch
    los las por una uno sus como pero cuando esta este
    и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по только
    её мне было вот от меня ещё нет о из ему когда даже ну ли если уже или ни быть был него до
    вас нибудь опять уж вам ведь там потом себя ничего ей может они тут где есть надо ней для
    мы тебя их чем была сам чтоб без будто чего раз тоже себе под будет ж тогда кто этот того
    потому этого какой совсем ним здесь этом один почти мой тем чтобы неё сейчас были куда
    зачем всех никогда можно при наконец об другой хоть после над больше тот через эти нас про
    всего них какая много разве эту моя впрочем свою этой перед иногда чуть том нельзя такой
    им более всегда конечно всю между это также при
    في من على إلى عن أن إن ما لا هذا هذه ذلك تلك التي الذي الذين كان كانت يكون مع عند كل قد
    ثم أو لم لن هو هي هم بعد قبل حتى إذا لكن بين غير أيضا منذ حيث كما عندما دون
    של את על עם זה זו זאת לא כי גם אם או הוא היא הם הן יש אין כל אחרי לפני כאשר אבל רק עוד
    כמו אשר מה מי איך למה כן היה היו יהיה
    的 了 是 在 和 与 及 或 也 就 都 而 被 把 这 那 个 之 其 等 着 吗 呢 吧
    から まで より ので のに です でした ます ました ません して した する します しました
    される された されて されます ない なく なし いる います いた いて ある あり あります
    あった こと もの ため よう ような ように これ それ あれ この その あの など という
    について による により において とき では には とは でも ても にも への との での だけ
    しか また および なる なった なります なり できる できない できます ください している
    しています していた されている
"""  # noqa: RUF001 (Cyrillic letters that look Latin are meant)
# "fails", "failing" and "failure" are one idea; Snowball's English stemmer makes them one token.
_STEMMER = snowballstemmer.stemmer("english")
# The same for the languages that each own a script: a word is stemmed by its script's
# language, so a lesson and a ticket in that language meet whatever their word forms.
_STEMMERS = {
    script: snowballstemmer.stemmer(language)
    for script, language in (("cyrillic", "russian"), ("arabic", "arabic"), ("greek", "greek"))
}
# A Snowball stemmer keeps the word it works on in the instance: one at a time.
_STEM_LOCK = threading.Lock()
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
_HEADINGS = tuple(f"h{level}." for level in range(1, 7))
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
    # Each pattern runs only when the character it cannot match without is in the text: most
    # lessons are plain sentences, and an import tokenizes tens of thousands of them.
    if "{" in text:
        text = _MACRO.sub(_DROP_MACRO, text)
    if "```" in text or "~~~" in text:
        text = _FENCE.sub(" ", text)
    if "." in text and any(heading in text for heading in _HEADINGS):
        text = _WIKI_HEADING.sub("", text)
    if "[" in text:
        text = _ACCOUNT.sub(_DROP_ACCOUNT, text)
        text = _WIKI_LINK.sub(r"\1 ", text)
        text = _MD_LINK.sub(_MD_LINK_TEXT, text)
    if "<" in text:
        text = _HTML.sub(" ", text)
    if "://" in text or "w." in text or "W." in text:  # "www.", in any case
        text = _URL.sub(" ", text)
    return text


def _character_class(points: Iterable[int]) -> str:
    """The body of a regex character class matching exactly ``points``, as ranges."""
    spans: list[list[int]] = []
    for point in sorted(points):
        if spans and point == spans[-1][1] + 1:
            spans[-1][1] = point
        else:
            spans.append([point, point])
    return "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in spans
    )


# Text outside ASCII is first brought to one spelling, so that a lesson and a ticket typed on
# different keyboards meet: NFKC (full-width letters, ligatures, compatibility forms), then the
# marks below dropped from the letters that carry them (café = cafe, Hebrew with and without
# vowel points, Arabic with and without harakat or hamza). Only these blocks' non-spacing marks
# go: elsewhere (Devanagari, Thai, the voicing marks of kana) a mark is part of the letter.
_FOLDED_BLOCKS = (
    (0x0300, 0x036F),  # combining diacritics of Latin, Greek and Cyrillic letters
    (0x0483, 0x0489),  # Cyrillic
    (0x0591, 0x05C7),  # Hebrew points and cantillation
    (0x0610, 0x061A),  # Arabic
    (0x064B, 0x065F),
    (0x0670, 0x0670),
    (0x06D6, 0x06ED),
    (0x08D3, 0x08FF),
    (0x1AB0, 0x1AFF),  # combining diacritics, extended and supplement
    (0x1DC0, 0x1DFF),
    (0x20D0, 0x20FF),
    (0xFE20, 0xFE2F),
)
_BREVE, _DIAERESIS = 0x0306, 0x0308
_FOLDED_MARKS = {
    point
    for first, last in _FOLDED_BLOCKS
    for point in range(first, last + 1)
    if unicodedata.category(chr(point)) == "Mn"
}
_FOLD_MARKS = re.compile(f"[{_character_class(_FOLDED_MARKS - {_BREVE, _DIAERESIS})}]++")
# The breve and the diaeresis go too, except where the mark makes another letter of the
# alphabet: Russian "й" is not "и" (and the Russian stemmer strips endings such as "-ый" it
# would no longer see), nor is the Ukrainian yi "ї" an i or the Belarusian short u "ў" a u.
_FOLD_BREVE_AND_DIAERESIS = re.compile(
    r"(?<![\u0418\u0438\u0423\u0443])\u0306"  # breve, kept on Cyrillic i and u
    r"|(?<![\u0406\u0456])\u0308"  # diaeresis, kept on Ukrainian i
)
# Invisible characters inside words go: joiners, a soft hyphen, the Arabic stretching tatweel,
# variation selectors; a zero-width space is a space.
_INVISIBLE = {
    **dict.fromkeys("\u00ad\u0640\u200c\u200d\u2060\ufeff", ""),
    **dict.fromkeys(map(chr, range(0xFE00, 0xFE10)), ""),
    "\u200b": " ",
}
# NFKC makes a few characters many (U+FDFA is 18): a forged text of them is cut at this many
# times its length, which no real text comes near.
_MAX_GROWTH = 2


def fold(text: str) -> str:
    """The text in one spelling: NFKC, then accents, vowel points and invisible joiners dropped.

    Case is kept (identifiers are split at case changes later); ASCII text is returned as is.
    """
    if text.isascii():
        return text
    text = unicodedata.normalize("NFKC", text)[: _MAX_GROWTH * len(text)]
    scan = _scan()
    if scan.replaced.search(text):
        text = scan.replaced.sub(scan.replacement, text)
    return _without_marks(text)


def _without_marks(text: str) -> str:
    """The text in NFC without the marks folded away."""
    text = _FOLD_MARKS.sub("", unicodedata.normalize("NFD", text))
    if "\u0306" in text or "\u0308" in text:
        text = _FOLD_BREVE_AND_DIAERESIS.sub("", text)
    return unicodedata.normalize("NFC", text)


STOP_WORDS = (
    frozenset(_STOP.split())
    | frozenset(_TEMPLATE.split())
    | frozenset(_without_marks(word).casefold() for word in _STOP_ABROAD.split())
)

# Scripts written without spaces between words are indexed as overlapping pairs of characters
# ("连接超时" gives 连接, 接超, 超时): without a dictionary, a pair is the unit that two texts
# about the same thing share most often. Hangul is written with spaces, but its particles are
# glued to the nouns ("서버가", "서버를"), which pairs get past too.
_SPACELESS_SCRIPTS = {
    "han": "\u2e80-\u2fdf\u3005\u3007\u3021-\u302f\u3038-\u303b\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\U00020000-\U0003ffff",
    "hiragana": "\u3041-\u309f",
    "katakana": "\u30a0-\u30ff\u31f0-\u31ff",
    "hangul": "\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7af\ud7b0-\ud7ff",
    "thai": "\u0e00-\u0e7f",
    "lao": "\u0e80-\u0eff",
    "khmer": "\u1780-\u17ff\u19e0-\u19ff",
    "myanmar": "\u1000-\u109f\uaa60-\uaa7f",
}
# Scripts written with spaces whose words get their own rules: a stemmer, or Hebrew's prefixes.
_WORD_SCRIPTS = {
    "cyrillic": "\u0400-\u052f\u1c80-\u1c8f\u2de0-\u2dff\ua640-\ua69f",
    "greek": "\u0370-\u03ff\u1f00-\u1fff",
    "arabic": "\u0600-\u06ff\u0750-\u077f\u0870-\u08ff\ufb50-\ufdff\ufe70-\ufefc",
    "hebrew": "\u0590-\u05ff\ufb1d-\ufb4f",
}
_LISTED = {**_SPACELESS_SCRIPTS, **_WORD_SCRIPTS}
# A character of a spaceless script with the marks that belong to it (Thai vowels and tones).
_SPACELESS_MARKS = _character_class(
    point
    for point in [*range(0x0E00, 0x1100), *range(0x1780, 0x1800), *range(0x3000, 0x3100)]
    if unicodedata.category(chr(point)).startswith("M")
)
_CHARACTER = re.compile(f"[^{_SPACELESS_MARKS}][{_SPACELESS_MARKS}]*+|[{_SPACELESS_MARKS}]++")
# A single character of these is a word ("锁" is a lock, "키" a key); one of the others (a kana
# particle such as "の" or "が", a Thai letter) is not.
_SINGLE_CHARACTER_WORDS = frozenset({"han", "hangul"})
# Hebrew writes "and", "the", "in", "to", "from", "that" and "as" as one letter glued to the
# next word: "השרת" is "the server". A word is indexed with up to two such letters taken off
# too, so that "לשרת" and "שרת" meet (a word that only looks prefixed adds a token nobody uses).
_HEBREW_PREFIXES = frozenset("והבכלמש")
# No word is longer; a longer "word" is forged, and stemmers are slow on it.
_MAX_STEMMED = 64


@dataclass(frozen=True)
class _Scan:
    """The patterns and table for text outside ASCII, made once per process."""

    raw: re.Pattern[str]  # a raw token: word characters and marks, joined by separators
    word: re.Pattern[str]  # a run of word characters and marks
    runs: re.Pattern[str]  # a word's runs of one script each
    replaced: re.Pattern[str]  # an invisible character, or a decimal digit other than 0-9
    replacements: dict[str, str]

    def replacement(self, match: re.Match[str]) -> str:
        """What a match of ``replaced`` becomes."""
        return self.replacements[match.group()]


@cache
def _scan() -> _Scan:
    """Read the categories of the BMP: its marks and its digits (tens of milliseconds, once).

    Python's ``\\w`` has no marks, so it would cut "हिन्दी" at its vowel signs. Read on the
    first text outside ASCII, so that processes that only see English never pay.
    """
    categories = "".join(map(unicodedata.category, map(chr, range(0x10000))))
    # Each category is two characters and only the first is upper case, so a match of
    # "M" + "n", "c" or "e", or of "Nd", starts at an even offset: offset // 2 is the point.
    marks = [m.start() // 2 for m in re.finditer("M[nce]", categories)]
    digits = [m.start() // 2 for m in re.finditer("Nd", categories)]
    word = rf"[\w{_character_class(marks)}]"
    replacements = {
        **{chr(d): str(unicodedata.decimal(chr(d))) for d in digits if d >= 0x80},
        **_INVISIBLE,
    }
    # The rest (Latin, Devanagari, ...) is "other". Linear: the alternatives' classes are
    # disjoint, so at most one can start at a position.
    runs = "|".join(f"(?P<{name}>[{chars}]++)" for name, chars in _LISTED.items())
    return _Scan(
        raw=re.compile(rf"{word}++(?:[./:$#\\-]{word}++)*+"),
        word=re.compile(f"{word}++"),
        runs=re.compile(f"{runs}|(?P<other>[^{''.join(_LISTED.values())}]++)"),
        replaced=re.compile(f"[{_character_class(map(ord, replacements))}]"),
        replacements=replacements,
    )


def _keep(token: str) -> bool:
    # Long digit runs are line numbers, ids and timestamps: noise for matching lessons.
    return len(token) > 1 and token not in STOP_WORDS and not (token.isdigit() and len(token) > 4)


def tokenize(text: str | None) -> list[str]:
    """Tokens of engineering text in any language: words in one spelling, identifiers split.

    ``getUserById`` gives getuserbyid, get, user, by, id (stop words then drop ``by``);
    ``org.apache.zookeeper.ClientCnxn`` keeps the dotted name and its parts, and
    ``ConnectionTimeoutException`` gives connection, timeout and exception too. Words are
    case-folded and lose their accents (``Straße`` = ``strasse``, ``café`` = ``cafe``);
    Russian, Arabic and Greek words are stemmed in their language, English and other Latin
    ones in English; Chinese, Japanese, Korean and Thai give overlapping character pairs.
    """
    text = strip_markup(fold(text or ""))
    tokens: list[str] = []
    if text.isascii():  # the common case, at the speed of the ASCII patterns
        for raw in _RAW.findall(text):
            tokens.extend(_identifier_tokens(raw))
        return tokens
    for raw in _scan().raw.findall(text):
        tokens.extend(_identifier_tokens(raw) if raw.isascii() else _tokens_abroad(raw))
    return tokens


def plain_words(text: str) -> list[str]:
    """The words of ``text`` as written, in one spelling: neither stemmed nor dropped as stop words.

    For comparing two texts word by word, where "do not retry" must differ from "retry":
    case-folded runs of letters and digits without accents (``Café`` = ``cafe``), and runs of
    Chinese, Japanese, Korean or Thai as overlapping character pairs, since they have no spaces.
    """
    folded = fold(text).casefold()
    if folded.isascii():
        return _ASCII_WORD.findall(folded)
    scan = _scan()
    words: list[str] = []
    for word in scan.word.findall(folded):
        for run in scan.runs.finditer(word):
            script = run.lastgroup or "other"
            if script in _SPACELESS_SCRIPTS:
                words.extend(_pairs(run.group(), script))
            else:
                words.append(run.group())
    return words


_ASCII_WORD = re.compile(r"\w++", re.ASCII)


# Cached because engineering text repeats its words: most lessons are made of words the
# process has split and stemmed before, and a lookup is ten times quicker than the split.
@lru_cache(maxsize=200_000)
def _identifier_tokens(raw: str) -> tuple[str, ...]:
    """The tokens of an ASCII word or identifier: whole, then its parts."""
    pieces = [p for p in _SEPARATORS.split(raw) if p]
    parts = [w for piece in pieces for w in (_CAMEL.findall(piece) or [piece])]
    words = [p.lower() for p in parts]
    if len(parts) > 1:
        words.insert(0, raw.lower().strip("_"))
    return tuple(_stem(word) for word in words if _keep(word))


def _tokens_abroad(raw: str) -> list[str]:
    """The tokens of a word or identifier with letters outside ASCII, each script on its own.

    ``Redis连接超时`` is the English word redis, then the pairs of the Chinese run.
    """
    script_runs = _scan().runs
    run = script_runs.fullmatch(raw)
    if run is not None:  # most words: one script, no separators
        script, letters = run.lastgroup or "other", run.group()
        if script in _SPACELESS_SCRIPTS:
            return _pairs(letters, script)
        folded = letters.casefold()  # Straße -> strasse: English after all
        return _word_tokens(folded, "english" if folded.isascii() else script)
    parts: list[tuple[str, str]] = []  # (word, script), "english" for ASCII words
    paired = False
    for piece in _SEPARATORS.split(raw):
        for run in script_runs.finditer(piece):
            script, letters = run.lastgroup or "other", run.group()
            if script in _SPACELESS_SCRIPTS:
                paired = True
                parts.append((letters, script))
            elif letters.isascii():
                parts.extend((part.lower(), "english") for part in _CAMEL.findall(letters))
            else:
                folded = letters.casefold()  # Straße -> strasse: English after all
                parts.append((folded, "english" if folded.isascii() else script))
    tokens: list[str] = []
    if len(parts) > 1 and not paired:  # an identifier, kept whole too as in English
        whole = raw.casefold().strip("_")
        tokens.extend(_word_tokens(whole, "english" if whole.isascii() else parts[-1][1]))
    for word, script in parts:
        if script in _SPACELESS_SCRIPTS:
            tokens.extend(_pairs(word, script))
        else:
            tokens.extend(_word_tokens(word, script))
    return tokens


def _word_tokens(word: str, script: str) -> list[str]:
    """The tokens of one case-folded word of ``script``: stemmed in its language, or as is."""
    if not _keep(word):
        return []
    if script == "english":
        return [_stem(word)]
    if script == "hebrew":
        return _hebrew_forms(word)
    return [_stem_in(script, word)]


def _pairs(letters: str, script: str) -> list[str]:
    """Overlapping pairs of characters (each with its marks) of a run of a spaceless script."""
    if letters in STOP_WORDS:
        return []
    characters = _CHARACTER.findall(letters)
    if len(characters) == 1:
        return [letters] if script in _SINGLE_CHARACTER_WORDS else []
    return [a + b for a, b in itertools.pairwise(characters)]


def _hebrew_forms(word: str) -> list[str]:
    """A Hebrew word, and the word without one and two of the one-letter words glued before it."""
    forms = [word]
    while len(forms) < 3 and len(forms[-1]) >= 4 and forms[-1][0] in _HEBREW_PREFIXES:
        forms.append(forms[-1][1:])
    return [form for form in forms if form not in STOP_WORDS]


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    if not word.isalpha():
        return word
    with _STEM_LOCK:
        return _STEMMER.stemWord(word)


@lru_cache(maxsize=200_000)
def _stem_in(script: str, word: str) -> str:
    stemmer = _STEMMERS.get(script)
    if stemmer is None or len(word) > _MAX_STEMMED or not word.isalpha():
        return word
    with _STEM_LOCK:
        return stemmer.stemWord(word)


@dataclass(frozen=True)
class Ticket:
    """A ticket as retrieval sees it, whether from Jira, GitHub, the CLI or the API."""

    key: str | None
    summary: str
    description: str | None = None
    labels: tuple[str, ...] = field(default_factory=tuple)
    scope: str | None = None
    # Repository paths a search names outright (`paths`), besides those its text names.
    paths: tuple[str, ...] = field(default_factory=tuple)

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
        cls,
        text: str,
        labels: Sequence[str] = (),
        scope: str | None = None,
        key: str | None = None,
        paths: Sequence[str] = (),
    ) -> Ticket:
        """From free text (the CLI and the API): the first line is the summary."""
        summary, _, rest = text.strip().partition("\n")
        return cls(
            key=key,
            summary=summary,
            description=rest or None,
            labels=tuple(labels),
            scope=scope,
            paths=tuple(paths),
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
