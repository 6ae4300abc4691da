"""Whether a value written beside a secret-sounding name is a credential or prose.

A value counts only when it looks random (long enough, mixed characters, high entropy) and
is not a placeholder, a masked value, a path or a reference to where the value lives.
"""

from __future__ import annotations

import math
import re
from collections import Counter

# What may follow a value in prose: "password=hunter2secret." ends at the letter.
TRAILING = ".)]}>"
# A value that names where the secret lives instead of being one.
_REFERENCE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*(?P<call>[(\[])?")
# Demo values and the words of a value to fill in; Java's keystores default to "changeit". A
# value is a placeholder only when it is made of such words alone ("your-password",
# "example_secret"): "hunter2secret" or "MySecretPass1" hold the word and are still passwords.
_PLACEHOLDER_WORDS = frozenset(
    {
        "redacted",
        "changeme",
        "changeit",
        "example",
        "placeholder",
        "password",
        "passwd",
        "pass",
        "pwd",
        "secret",
        "token",
        "key",
        "api",
        "your",
        "my",
        "here",
        "dummy",
        "fake",
        "sample",
        "user",
        "username",
    }
)


def _entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def placeholder(value: str) -> bool:
    """``<token>``, ``$TOKEN``, ``TOKEN``, ``xxxxxxxx``, ``your-token``: a value to fill in."""
    lowered = value.lower()
    return (
        value[:1] in ("<", "{", "$", "%")
        or "..." in lowered
        or _only_filler(lowered)
        or lowered.startswith("your")
        or re.fullmatch(r"[A-Z][A-Z0-9_]*", value) is not None  # an environment variable
        or len(set(lowered)) <= 2
        or shown_masked(value)
    )


def _only_filler(lowered: str) -> bool:
    parts = [part for part in re.split(r"[^a-z0-9]+", lowered) if part]
    return bool(parts) and all(part in _PLACEHOLDER_WORDS for part in parts)


def shown_masked(value: str) -> bool:
    """``sk_live_xxxxxxxxxxxxxxxx``, ``ghp_************``: a credential's shape, shown masked."""
    return (value.count("x") + value.count("X") + value.count("*")) * 2 >= len(value)


def looks_random(value: str) -> bool:
    """Whether a value assigned to a secret-sounding name looks like a credential.

    At least 8 characters; not a placeholder, a path, an address or a reference to where
    the value lives (``os.environ["X"]``, ``settings.api_key``); and random looking:
    letters with digits or symbols and some entropy, or a long run of letters with high
    entropy (words joined by ``-`` or ``_`` are prose, not a password).
    """
    value = value.strip("\"'`").rstrip(TRAILING)
    if len(value) < 8 or placeholder(value):
        return False
    if value[0] in "/~." or "://" in value or value.startswith("@"):
        return False
    if not value.isascii():
        return False  # prose in another script, or bytes dumped by a debugger
    # `os.environ["X"]`, `users.getProperty(user)`, `settings.api_key`: where it lives.
    reference = _REFERENCE.match(value)
    if reference and (
        reference.group("call")
        or (reference.end() == len(value) and not any(ch.isdigit() for ch in value))
    ):
        return False
    if not _random_run(value):
        return False
    # Words joined by `-` or `_` read as prose ("use_the_v2_client"); a credential with
    # separators has a random run of its own (django-insecure-8h$k2...).
    parts = [part for part in re.split(r"[-_.]", value) if part]
    words = sum(part.isalpha() for part in parts)
    if len(parts) == 1 or words * 2 < len(parts):
        return True
    return any(len(part) >= 8 and _random_run(part) for part in parts)


def _random_run(value: str) -> bool:
    letters = sum(ch.isalpha() for ch in value)
    digits = sum(ch.isdigit() for ch in value)
    symbols = len(value) - letters - digits - sum(ch in "-_." for ch in value)
    if letters == 0:
        return False  # numbers, dates and times
    if digits or symbols:
        # All distinct characters reach log2(length) bits; a few repeats are allowed.
        return _entropy(value) >= min(3.0, math.log2(len(value)) - 0.35)
    return len(value) >= 20 and _entropy(value) >= 4.0
