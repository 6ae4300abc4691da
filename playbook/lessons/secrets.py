"""Credentials in lesson text, found by kind and place; the value itself is never kept or shown.

A lesson is posted in public comments and sent to every agent, so text holding an API key,
a token or a private key must not be stored. The well-kept scanner ``detect-secrets`` finds
the credentials that have a shape of their own (AWS, GitHub, Slack, private key blocks, JWTs,
passwords in URLs, ...); a few rules of ours add what it leaves out (GitHub's fine-grained
tokens, encrypted private keys, bearer headers) and replace what does not fit free text.

A value assigned to a name such as ``password`` or ``token`` counts only when it looks random
(long enough, mixed characters, high entropy): lesson prose says "set the token via the env"
far more often than it leaks one. The library's own rules for those are not used: its keyword
patterns take minutes on a hostile line of 8,000 characters ("password" repeated), and its
entropy plugins, given free text, flag every other word and every commit sha.
"""

from __future__ import annotations

import logging
import re
import threading
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from playbook.lessons import characters
from playbook.lessons import secret_values as values
from playbook.lessons.fields import FieldProblem

# The longest lesson any setting allows (PLAYBOOK_MAX_LESSON_CHARS is at most 100,000): rows
# stored before that cap, and other fields, are read no further, which bounds the work.
SCAN_CHARS = 100_000
# Some of the library's patterns take quadratic time on a long line built to be hostile (JWT's
# lazy tail), so a long line is read in overlapping windows: a credential up to ``_OVERLAP``
# characters long is whole in one of them.
_WINDOW = 8_192
_OVERLAP = 2_048
ASSIGNED = "assigned_secret"

# detect-secrets plugins with a shape of their own: class name, the ``secret_type`` its findings
# carry, and our stable code and words for it. Left out on purpose, besides the keyword and
# entropy plugins: IP addresses (not credentials), and Telegram and Artifactory tokens (their
# shapes match hex transaction ids in logs and capitalised words).
_PLUGINS = {
    "AWSKeyDetector": ("AWS Access Key", "aws_access_key", "an AWS access key"),
    "AzureStorageKeyDetector": (
        "Azure Storage Account access key",
        "azure_storage_key",
        "an Azure storage key",
    ),
    "BasicAuthDetector": ("Basic Auth Credentials", "url_password", "a password in a URL"),
    "DiscordBotTokenDetector": ("Discord Bot Token", "discord_token", "a Discord bot token"),
    "GitHubTokenDetector": ("GitHub Token", "github_token", "a GitHub token"),
    "GitLabTokenDetector": ("GitLab Token", "gitlab_token", "a GitLab token"),
    "JwtTokenDetector": ("JSON Web Token", "jwt", "a JSON Web Token"),
    "MailchimpDetector": ("Mailchimp Access Key", "mailchimp_key", "a Mailchimp key"),
    "NpmDetector": ("NPM tokens", "npm_token", "an npm token"),
    "OpenAIDetector": ("OpenAI Token", "openai_key", "an OpenAI key"),
    "PrivateKeyDetector": ("Private Key", "private_key", "a private key"),
    "PypiTokenDetector": ("PyPI Token", "pypi_token", "a PyPI token"),
    "SendGridDetector": ("SendGrid API Key", "sendgrid_key", "a SendGrid key"),
    "SlackDetector": ("Slack Token", "slack_token", "a Slack token"),
    "SquareOAuthDetector": ("Square OAuth Secret", "square_secret", "a Square OAuth secret"),
    "StripeDetector": ("Stripe Access Key", "stripe_key", "a Stripe key"),
    "TwilioKeyDetector": ("Twilio API Key", "twilio_key", "a Twilio key"),
}
_KINDS = {secret_type: (kind, label) for secret_type, kind, label in _PLUGINS.values()}
# Only filters that judge the value itself: `<password>`, `${TOKEN}`, `$TOKEN`, `*****`. The
# library's line filters (an id or a function call elsewhere on the line) would also hide a
# GitHub token that shares its line with `client = Github(token)`.
_FILTERS = (
    "detect_secrets.filters.heuristic.is_templated_secret",
    "detect_secrets.filters.heuristic.is_prefixed_with_dollar_sign",
    "detect_secrets.filters.heuristic.is_not_alphanumeric_string",
    "detect_secrets.filters.heuristic.is_sequential_string",
)

# What some part of each library plugin's patterns must contain, by plugin: a line holding none
# of them cannot match any of the library's patterns, so it is not given to the library, and a
# command that writes ordinary prose never imports it (~0.1 s). Each is a literal part of the
# plugin's own pattern, or the pattern's long run itself; a test generates strings from every
# pattern the installed library has and checks that each is caught here.
_LIBRARY_CUES = {
    "AWSKeyDetector": r"A3T|ABIA|ACCA|AKIA|ASIA|[0-9a-zA-Z/+]{40}",
    "AzureStorageKeyDetector": r"AccountKey=",
    "BasicAuthDetector": r"://",
    "DiscordBotTokenDetector": r"[MNO][a-zA-Z\d_-]{23,25}\.",  # \d as the plugin has it
    "GitHubTokenDetector": r"gh[pousr]_",
    "GitLabTokenDetector": r"gl[a-z]{2,6}-|GR1348941",
    "JwtTokenDetector": r"eyJ",
    "MailchimpDetector": r"-us[0-9]",
    "NpmDetector": r"_authToken",
    "OpenAIDetector": r"T3BlbkFJ",
    "PrivateKeyDetector": r"PRIVATE KEY|PuTTY-User-Key-File-2",
    "PypiTokenDetector": r"pypi-",
    "SendGridDetector": r"SG\.",
    "SlackDetector": r"(?i:xox[abposr]-|hooks\.slack\.com)",
    "SquareOAuthDetector": r"sq0csp-",
    "StripeDetector": r"k_live_",
    "TwilioKeyDetector": r"(?:AC|SK)[a-z0-9]{32}",
}
# One alternation of literals and bounded runs: linear on any line.
_LIBRARY_CUE = re.compile("|".join(f"(?:{cue})" for cue in _LIBRARY_CUES.values()))
# The cues that are not a long run (a word of 20 characters or more) hold one of these; the
# alternation above, which tries every branch at every position, runs only on a line that
# has one or such a word (`_may_hold_library_credential`).
_SHORT_CUES = ("AccountKey=", "://", "eyJ", "-us", "_authToken", "PRIVATE KEY", "pypi-", "SG.")
_LONG_CUE = 20


def _may_hold_library_credential(line: str) -> bool:
    """Whether a pattern of the library's plugins we use could match in ``line``."""
    quick = (
        any(cue in line for cue in _SHORT_CUES)
        or ("-" in line and ("x" in line or "X" in line))  # Slack's xox?- in any case
        or any(len(word) >= _LONG_CUE for word in line.split())
    )
    return quick and _LIBRARY_CUE.search(line) is not None


# What the library leaves out. Fine-grained GitHub tokens: github_pat_, 22 + 59 characters.
_GITHUB_PAT = re.compile(r"github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59}")
# Every kind of private key block, encrypted ones too (the library knows RSA, EC, ...).
_PRIVATE_KEY = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----")
# `Authorization: Bearer <token>` and friends.
_BEARER = re.compile(r"\b(?:Bearer|Basic|token)[ \t]{1,8}([A-Za-z0-9._~+/=-]{16,1024})")
# `name = value`, `name: value`, `"name": "value"`: a name, an assignment, and one word. The
# quantifiers are bounded, so a hostile line costs linear time.
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.-])(?P<name>[A-Za-z][A-Za-z0-9_.-]{0,63})(?P<closing>[\"'\]]{0,2})"
    r"[ \t]{0,8}(?::=|=>|==|=|(?P<colon>:))(?P<space>[ \t]{0,8})(?P<quote>[\"'`]?)"
    r"(?P<value>[^\s\"'`,;]{1,1024})"
)
_NAME_PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
# A name is secret-sounding when its last word is one of these ...
_SECRET_WORDS = frozenset(
    {"password", "passwd", "pwd", "passphrase", "secret", "token", "apikey", "credential"}
)
# ... or it ends "<one of these> key" (api_key, secretKey, AWS_SECRET_ACCESS_KEY), or
# "<db|key|...> pass" (db_pass).
_KEY_WORDS = frozenset(
    {"api", "access", "auth", "private", "secret", "client", "signing", "master"}
)
_PASS_WORDS = frozenset({"db", "database", "key", "ldap", "smtp", "mysql", "postgres", "redis"})
# What the last word of every secret-sounding name holds (password and passphrase hold "pass").
_NAME_CUES = ("pass", "pwd", "secret", "token", "key", "credential")
# The rest of a token: one class and no alternation, matched in C at one place (linear).
_TOKEN_REST = re.compile(r"[A-Za-z0-9_-]*")


@dataclass(frozen=True)
class Finding:
    """One credential: what kind, and where (1-based line and inclusive character span)."""

    kind: str  # a stable code, e.g. github_token
    label: str  # in a user's words, e.g. "a GitHub token"
    line: int
    start: int
    end: int

    def where(self) -> str:
        """``line 1, characters 12-51``: enough to find it, nothing of the value."""
        return f"line {self.line}, characters {self.start}-{self.end}"

    def describe(self) -> str:
        """``a GitHub token (line 1, characters 12-51)``."""
        return f"{self.label} ({self.where()})"


def summary(findings: list[Finding]) -> str:
    """The first credential and how many more: ``a GitHub token (line 1, ...) and 1 more``."""
    more = len(findings) - 1
    tail = f" and {more} more credential{'s' if more > 1 else ''}" if more else ""
    return findings[0].describe() + tail


_lock = threading.Lock()
_library: dict[str, Any] = {}


def _load() -> dict[str, Any]:
    """detect-secrets, imported on first use: it takes ~90 ms, which `search` need not pay."""
    if _library:
        return _library
    # Its logger module turns logging.captureWarnings on for the whole process; undone, so
    # that importing a scanner changes nothing about how this process reports warnings.
    shown_before = warnings.showwarning
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import transient_settings

    if warnings.showwarning is not shown_before:
        logging.captureWarnings(False)
    _library.update(
        scan_line=scan_line,
        transient_settings=transient_settings,
        settings={
            "plugins_used": [{"name": name} for name in _PLUGINS],
            "filters_used": [{"path": path} for path in _FILTERS],
        },
    )
    return _library


def find(text: str | None) -> list[Finding]:
    """The credentials in ``text``, in reading order; empty when there are none."""
    if not text:
        return []
    return _findings(text[:SCAN_CHARS])


def _findings(text: str) -> list[Finding]:
    """The credentials in all of ``text`` (long lines are read in windows: linear work)."""
    windows = [
        (number, offset, window)
        for number, line in enumerate(text.splitlines(), start=1)
        for offset, window in _windows(line)
    ]
    library = _library_findings([window for _, _, window in windows])
    spans: list[Finding] = []
    for (number, offset, window), found in zip(windows, library, strict=True):
        for kind, label, start, end in _spans(window, found):
            spans.append(Finding(kind, label, number, offset + start + 1, offset + end))
    # Two rules (or two windows) finding one credential make one finding: the longest first.
    kept: list[Finding] = []
    for finding in sorted(spans, key=lambda f: (f.line, f.start, -f.end)):
        if not kept or kept[-1].line != finding.line or kept[-1].end < finding.start:
            kept.append(finding)
    return kept


def _whole_token(line: str, start: int, end: int) -> int:
    """The end of the token a plugin found part of: GitHub's reports ``ghp`` only, and
    JWT's lazy pattern stops short of the signature."""
    return _TOKEN_REST.match(line, end).end()  # type: ignore[union-attr]  # always matches


def _windows(line: str) -> Iterator[tuple[int, str]]:
    if len(line) <= _WINDOW:
        yield 0, line
        return
    for start in range(0, len(line) - _OVERLAP, _WINDOW - _OVERLAP):
        yield start, line[start : start + _WINDOW]


# Set on the thread inside `scanning`: the exit stack that holds the lock and the library's
# settings once a line needs them (None outside), and whether it holds them yet.
_batch = threading.local()


@contextmanager
def scanning() -> Iterator[None]:
    """Scan many texts under one set-up of the library (~0.3 ms each time, far more than a
    short line's scan): for a caller checking thousands of texts in a row, such as an import.

    The set-up happens at the first line that needs the library, if any; other threads'
    scans wait from then until the block ends, since its settings are process-wide.
    """
    if getattr(_batch, "stack", None) is not None:
        yield
        return
    stack = ExitStack()
    _batch.stack, _batch.held = stack, False
    try:
        yield
    finally:
        _batch.stack = None
        stack.close()


def _library_findings(lines: list[str]) -> list[list[Any]]:
    """The library's findings in each line; none, without asking it, where no cue is."""
    cued = [_may_hold_library_credential(line) for line in lines]
    if not any(cued):
        return [[] for _ in lines]
    library = _load()
    stack: ExitStack | None = getattr(_batch, "stack", None)
    if stack is None:
        # The library's settings are process-wide state, so one scan at a time.
        with _lock, library["transient_settings"](library["settings"]):
            return _scanned(library, lines, cued)
    if not _batch.held:
        stack.enter_context(_lock)
        stack.enter_context(library["transient_settings"](library["settings"]))
        _batch.held = True
    return _scanned(library, lines, cued)


def _scanned(library: dict[str, Any], lines: list[str], cued: list[bool]) -> list[list[Any]]:
    return [
        list(library["scan_line"](line)) if cue else []
        for line, cue in zip(lines, cued, strict=True)
    ]


def _spans(line: str, library: list[Any]) -> Iterator[tuple[str, str, int, int]]:
    """(kind, label, start, end) of each credential in one line, 0-based and end exclusive,
    given what the library found in it."""
    for secret in library:
        kind, label = _KINDS.get(secret.type, ("credential", "a credential"))
        value = secret.secret_value or ""
        found_to = -1
        for start in _occurrences(line, value):
            if kind != "url_password":
                if start < found_to:
                    continue  # inside the token just found ("ghp_ghp_..."): no new finding
                end = _whole_token(line, start, start + len(value))
                if not values.shown_masked(line[start:end]):
                    found_to = end
                    yield kind, label, start, end
            elif _the_password(line, start, value) and not values.placeholder(value):
                yield kind, label, start, start + len(value)
    # Each rule of ours runs only where the literal it cannot match without is: an import
    # scans every lesson, and most lines of prose hold none of them.
    if "github_pat_" in line:
        for match in _GITHUB_PAT.finditer(line):
            yield "github_token", "a GitHub token", match.start(), match.end()
    if "-----BEGIN" in line:
        for match in _PRIVATE_KEY.finditer(line):
            yield "private_key", "a private key", match.start(), match.end()
    if "Bearer" in line or "Basic" in line or "token" in line:
        for match in _BEARER.finditer(line):
            if values.looks_random(match.group(1)):
                yield "bearer_token", "a bearer token", match.start(1), match.end(1)
    if not _may_assign_a_secret(line):
        return
    for match in _ASSIGNMENT.finditer(line):
        name, value = match.group("name"), match.group("value").rstrip(values.TRAILING)
        if line.startswith(REMOVED, match.start("value")):
            continue  # `token = [credential removed]`: masked already, so masking twice = once
        # `host:8080`, `Test.password:153`: YAML puts a space after the colon, JSON quotes.
        bare_colon = match.group("colon") and not "".join(match.group("closing", "space", "quote"))
        if not bare_colon and _secret_name(name) and values.looks_random(value):
            start = match.start("value")
            yield (
                ASSIGNED,
                f"a credential assigned to {_shown_name(name)}",
                start,
                start + len(value),
            )


def _may_assign_a_secret(line: str) -> bool:
    """False when no `_ASSIGNMENT` in ``line`` can pass `_secret_name`: without an assignment
    sign, or without the part every secret-sounding name ends in (names are ASCII, so each
    lower-cases inside the line's lower case)."""
    if "=" not in line and ":" not in line:
        return False
    lowered = line.lower()
    return any(word in lowered for word in _NAME_CUES)


def _the_password(line: str, start: int, value: str) -> bool:
    """Whether this occurrence of a URL's password is the password (``:pw@``), not the same
    word as the user name or in the path (``admin:admin@host/admin``)."""
    return line[start - 1 : start] == ":" and line[start + len(value) :].startswith("@")


def _occurrences(line: str, value: str) -> Iterator[int]:
    if not value:
        return
    start = line.find(value)
    while start != -1:
        yield start
        start = line.find(value, start + len(value))


def _secret_name(name: str) -> bool:
    """``GITHUB_TOKEN``, ``db.password``, ``apiKey``, ``client_secret``; not ``token_ttl``."""
    parts = [part.lower() for part in _NAME_PARTS.findall(name)]
    if not parts:
        return False
    last = parts[-1]
    before = parts[-2] if len(parts) > 1 else ""
    if last in _SECRET_WORDS or last.rstrip("s") in _SECRET_WORDS:
        return True
    if last == "key":
        return before in _KEY_WORDS
    if last == "pass":
        return before in _PASS_WORDS
    return False


def _shown_name(name: str) -> str:
    """The name a value is assigned to, as the refusal may repeat it: only when it is made of
    words (``DB_PASSWORD``, ``apiKey``), so that no name can carry a credential out."""
    parts = re.split(r"[-_.]", name)
    if len(name) <= 40 and all(part.isalpha() and part.isascii() for part in parts if part):
        return name
    return "a password, secret or token name"


class HoldsCredential(FieldProblem):
    """A field refused because it holds a credential; ``findings`` say what and where."""

    def __init__(self, field: str, findings: list[Finding]) -> None:
        super().__init__(
            field,
            f"holds {summary(findings)}; remove the credential "
            "(rotate it if it was real) and try again",
        )
        self.findings = findings


# What a credential becomes in text that leaves the process: prompts and embeddings sent to the
# model endpoint (often another company's server), reports, panels and log lines.
REMOVED = "[credential removed]"
# Read beyond the cut of `masked(text, max_chars)`, so that a credential across the cut is
# whole in what is scanned (`_OVERLAP` as for long lines), and what is read to find the
# visible text at all: invisible characters may pad a text far beyond what is shown of it.
_MASK_MARGIN = _OVERLAP
_MASK_READ = 1_000_000
# A private key's block is at most this many lines (RSA 16384: about 170), END line included.
_KEY_LINES = 400
# A line of a key's body: base64, or a header (`DEK-Info: ...`, PuTTY's `Private-Lines: 14`),
# maybe quoted in a diff (`+`) or indented. No two parts can match the same characters: linear.
_KEY_BODY_LINE = re.compile(
    r"[+ -]?[ \t]{0,16}(?:[A-Za-z0-9+/=]{16,}|[A-Za-z-]{1,40}: [^\n]*)[ \t]*"
)


@dataclass(frozen=True)
class Masked:
    """A text as shown outside the process: visible, each credential in it masked."""

    text: str
    findings: list[Finding]  # what was masked, at places in the visible text


def mask(text: str | None, max_chars: int | None = None) -> Masked:
    """The one masking rule for whatever leaves the process; see `masked`."""
    if not text:
        return Masked("", [])
    read = _MASK_READ if max_chars is None else min(_MASK_READ, 4 * (max_chars + _MASK_MARGIN))
    # A zero-width space, soft hyphen or word joiner splits a token for a scanner but not for
    # a reader (nor a model or a terminal): credentials are looked for in the visible text.
    shown = characters.visible(text[:read])
    if len(text) > read:
        shown = _without_cut_word(shown)  # the part of a token cut off may be no token to scan
    if max_chars is not None:
        # A credential across ``max_chars`` is whole in the margin, and masked before the cut.
        shown = shown[: max_chars + _MASK_MARGIN]
    found: list[Finding] = []
    # A second look finds nothing the first did not (REMOVED is no credential, and an
    # assignment of it is skipped); the loop only bounds what a surprise could cost.
    for _ in range(3):
        more = _findings(shown)
        if not more:
            break
        found += more
        shown = _replaced(shown, more)
    if max_chars is not None:
        shown = shown[:max_chars]
    return Masked(shown, found)


def masked(text: str | None, max_chars: int | None = None) -> str:
    """``text`` as it may leave the process: its visible text, each credential in it replaced
    by `REMOVED`, cut to ``max_chars`` (after masking, so no cut leaves part of a token).

    Every exit calls this: model prompts and embedding inputs, reports the CLI prints, the
    gaps panel and API, log lines. Credentials are found by the lesson doors' scanner (`find`)
    in the visible text (`characters.visible`), so a token split by an invisible character is
    masked whole; masking twice gives what masking once gave.
    """
    return mask(text, max_chars).text


def _replaced(text: str, found: list[Finding]) -> str:
    """``text`` with each finding's span replaced by `REMOVED`; a private key's whole block."""
    lines = text.splitlines(keepends=True)  # split where the scanner splits
    by_line: dict[int, list[Finding]] = {}
    for finding in found:
        by_line.setdefault(finding.line - 1, []).append(finding)
    # From the last line up, so that dropping a key's body keeps earlier lines' numbers; each
    # line rebuilt once from its pieces, however many findings it has (linear in its length).
    for index in sorted(by_line, reverse=True):
        line, pieces, at = lines[index], [], 0
        body = False
        for finding in by_line[index]:  # in reading order, not overlapping (`find`)
            if finding.start - 1 < at:
                continue
            pieces += [line[at : finding.start - 1], REMOVED]
            at = finding.end
            if finding.kind == "private_key":
                # The scanner finds a key's first line; its body is the secret: up to the END
                # marker on this line, or, without one, the rest of it and the lines below.
                closing = line.find("-----END", at)
                after = -1 if closing == -1 else line.find("-----", closing + len("-----END"))
                if closing == -1 or after == -1:
                    at = len(line.rstrip("\r\n"))
                    body = closing == -1
                    break
                at = after + len("-----")
        lines[index] = "".join(pieces) + line[at:]
        if body:
            del lines[index + 1 : _block_end(lines, index + 1)]
    return "".join(lines)


def _block_end(lines: list[str], start: int) -> int:
    """Where a private key's body that starts at line ``start`` ends: after its END line, or
    before the first line that is no part of a key (a key cut short, or PuTTY's files). A
    blank line may stand inside (an encrypted PEM key's headers end with one)."""
    blank: int | None = None  # where the blank lines just read start
    for index in range(start, min(len(lines), start + _KEY_LINES)):
        line = lines[index].rstrip("\r\n")
        if "-----END" in line:
            return index + 1
        if not line.strip():
            blank = index if blank is None else blank
        elif _KEY_BODY_LINE.fullmatch(line):
            blank = None
        else:
            return index if blank is None else blank
    return min(len(lines), start + _KEY_LINES) if blank is None else blank


def _without_cut_word(text: str) -> str:
    """``text`` without its last word, which a cut may have left partial: at most its last
    `_OVERLAP` characters, where the start of a credential cut off can be."""
    end, stop = len(text), max(0, len(text) - _OVERLAP)
    while end > stop and not text[end - 1].isspace():
        end -= 1
    return text[:end]


def without_credentials(text: str) -> str:
    """``text`` as `masked` gives it (the name callers of earlier versions use)."""
    return masked(text)


def refuse(field: str, value: str | None) -> None:
    """Raise HoldsCredential naming ``field`` when ``value`` holds a credential."""
    found = find(value)
    if found:
        raise HoldsCredential(field, found)
