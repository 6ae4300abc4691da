"""Characters that make text read other than it says: dropped on the way in, isolated out.

A lesson is read by people in GitHub, Jira and /ui, and by agents: a right-to-left override
(U+202E) or an isolate makes it display in another order than its characters, and zero-width
characters hide words or split them. `visible` is the one rule every stored text goes through
(see `playbook.lessons.fields.text`); `isolated` is what comments wrap right-to-left lesson text in.
"""

from __future__ import annotations

import re
import unicodedata

# Dropped wherever they are. Every format character (category Cf) but the ones kept below, and
# the C0 and C1 controls but tab and newline (carriage returns become newlines first). Listed
# rather than scanned from unicodedata so that processes pay nothing at start-up; a test checks
# the list against the Unicode database this Python ships.
_DROPPED_RANGES = (
    (0x00, 0x08),
    (0x0B, 0x0C),
    (0x0E, 0x1F),
    (0x7F, 0x9F),  # DEL and the C1 controls
    (0xAD, 0xAD),  # soft hyphen
    (0x061C, 0x061C),  # Arabic letter mark
    (0x180E, 0x180E),  # Mongolian vowel separator
    (0x200B, 0x200B),  # zero-width space
    (0x200E, 0x200F),  # left-to-right and right-to-left marks
    (0x202A, 0x202E),  # embeddings and overrides
    (0x2060, 0x2064),  # word joiner and invisible operators
    (0x2066, 0x206F),  # isolates and the deprecated shaping controls
    (0xFEFF, 0xFEFF),  # byte order mark, zero-width no-break space
    (0xFFF9, 0xFFFB),  # interlinear annotation
    (0x13430, 0x1343F),  # Egyptian hieroglyph format controls
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol format controls
    (0xE0000, 0xE007F),  # tag characters
)
# Format characters that stay: the Arabic, Syriac and Kaithi number signs are visible marks
# written before a number and change no direction; the joiners are decided by `_joiner`.
KEPT_FORMAT = frozenset(
    [*range(0x0600, 0x0606), 0x06DD, 0x070F, 0x0890, 0x0891, 0x08E2, 0x110BD, 0x110CD]
)
JOINERS = "\u200c\u200d"  # zero-width non-joiner and joiner


def _escaped(code: int) -> str:
    # Spelled as both Python's re and the Rust regex of pydantic-core read it.
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )


# The body of a regex character class matching every character `visible` may drop, joiners
# included, in escapes: for patterns other engines read too (the API's OpenAPI schema).
INVISIBLE_CLASS = "".join(
    _escaped(a) if a == b else f"{_escaped(a)}-{_escaped(b)}"
    for a, b in (*_DROPPED_RANGES, (0x200C, 0x200D))
)
# One character per match and no repetition: linear on any text.
_DROPPED = re.compile(
    "["
    + "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in _DROPPED_RANGES
    )
    + "]"
)
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_JOINER = re.compile(f"[{JOINERS}]")
# Bidirectional classes that make a run read right to left, or reorder the numbers around it.
_RIGHT_TO_LEFT = frozenset(("R", "AL", "AN"))
FSI, PDI = "\u2068", "\u2069"  # first-strong isolate and its end


def dropped(char: str) -> bool:
    """True when ``visible`` drops ``char`` wherever it stands (the joiners depend on context)."""
    return _DROPPED.fullmatch(char) is not None


def visible(text: str) -> str:
    """``text`` without direction controls, invisible characters and controls, in NFC.

    Tab and newline stay; CR LF and a lone CR become a newline. A zero-width joiner or
    non-joiner stays only between two letters, marks or symbols outside ASCII (Persian
    words, Indic conjuncts, emoji sequences), where it changes how they join; elsewhere it
    hides a break inside a word or an id. Hebrew and Arabic letters are untouched.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if text.isascii():  # NFC leaves ASCII as it is
        return _ASCII_CONTROL.sub("", text) if _ASCII_CONTROL.search(text) else text
    text = _DROPPED.sub("", text)
    if _JOINER.search(text):
        text = _JOINER.sub(lambda match: _joiner(match, text), text)
    return unicodedata.normalize("NFC", text)


def _joiner(match: re.Match[str], text: str) -> str:
    """The joiner matched if it stands between two joinable characters, else nothing."""
    start, end = match.start(), match.end()
    before = text[start - 1] if start > 0 else ""
    after = text[end] if end < len(text) else ""
    return match.group() if _joinable(before) and _joinable(after) else ""


def _joinable(char: str) -> bool:
    # Letters and marks outside ASCII (ZWNJ in Persian, ZWJ in Devanagari conjuncts) and
    # symbols and modifiers (emoji sequences: 👩‍💻, skin tones, the variation selector).
    return bool(char) and not char.isascii() and unicodedata.category(char)[0] in "LMS"


def right_to_left(text: str) -> bool:
    """True when ``text`` has a character that reads right to left, or an Arabic digit."""
    return not text.isascii() and any(
        unicodedata.bidirectional(char) in _RIGHT_TO_LEFT for char in text
    )


def isolated(text: str) -> str:
    """``text`` made visible, and wrapped in an isolate if it holds right-to-left characters.

    Inside U+2068 ... U+2069 a Hebrew or Arabic lesson reads in its own direction without
    reordering the id, punctuation and notes around it. English text is left as it is, so
    the comments the bot already posted do not all change at once.
    """
    text = visible(text)
    return f"{FSI}{text}{PDI}" if right_to_left(text) else text
