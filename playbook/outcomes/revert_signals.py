"""What says a pull request reverts another: GitHub's revert button and git's own commit text.

Pure parsing of untrusted text, each bounded and linear: lines are split, words compared,
and hex runs read with a cap; no pattern can backtrack over what a PR holds.
"""

from __future__ import annotations

from collections.abc import Iterable

from playbook.outcomes.links import BODY_CHARS, BRANCH_CHARS

# GitHub's revert button writes "Reverts owner/repo#12" as the body's first line and names the
# branch "revert-12-<the reverted PR's branch>".
BODY_WORD = "reverts"
BRANCH_PREFIX = "revert-"
# `git revert` writes "This reverts commit <sha>." (a merge: "<sha>, reversing changes made to
# <parent>."); with --reference an abbreviated sha and the subject in parentheses.
COMMIT_PHRASE = "this reverts commit "
HEX = frozenset("0123456789abcdef")
# An abbreviated sha is at least 7 digits (git's default); SHA-256 repositories have 64.
SHA_MIN, SHA_MAX = 7, 64
# A PR number as GitHub keeps it (a 32-bit integer).
NUMBER_DIGITS = 10
NUMBER_MAX = 2**31 - 1
# A PR lists at most 250 commits through the API; more shas than that are noise.
MAX_SHAS = 250


def commit_sha(value: object) -> str | None:
    """A commit sha as the bot stores it (lower case hex, 7 to 64 digits), None if not one."""
    if not isinstance(value, str) or not SHA_MIN <= len(value) <= SHA_MAX:
        return None
    lowered = value.lower()
    return lowered if set(lowered) <= HEX else None


def _number(text: str) -> int | None:
    if not text or len(text) > NUMBER_DIGITS or not text.isascii() or not text.isdigit():
        return None
    number = int(text)
    return number if 1 <= number <= NUMBER_MAX else None


def in_body(body: str | None, repo: str) -> int | None:
    """The number of the PR a body's ``Reverts owner/repo#N`` (or ``Reverts #N``) line names.

    Only a line that starts with the word counts, and only a PR of ``repo``: a sentence that
    mentions a revert, or a PR of another repository, names nothing here.
    """
    for line in (body or "")[:BODY_CHARS].splitlines():
        words = line.split(None, 2)
        if len(words) < 2 or words[0].lower() != BODY_WORD:
            continue
        ref = words[1].rstrip(".,;:")
        owner_repo, hash_sign, number = ref.rpartition("#")
        if not hash_sign or (owner_repo and owner_repo.lower() != repo.lower()):
            continue
        found = _number(number)
        if found is not None:
            return found
    return None


def in_branch(head_ref: str | None) -> int | None:
    """The number a ``revert-N-<branch>`` head branch names, as GitHub's button names it."""
    ref = (head_ref or "")[:BRANCH_CHARS]
    if not ref.startswith(BRANCH_PREFIX):
        return None
    number, dash, rest = ref[len(BRANCH_PREFIX) :].partition("-")
    return _number(number) if dash and rest else None


def in_commits(messages: Iterable[str | None]) -> list[str]:
    """The shas that commit messages say they revert (``This reverts commit <sha>``), once each."""
    found: dict[str, None] = {}
    for message in messages:
        text = (message or "")[:BODY_CHARS].lower()
        at = text.find(COMMIT_PHRASE)
        while at != -1 and len(found) < MAX_SHAS:
            start = at + len(COMMIT_PHRASE)
            end = start
            while end < len(text) and end - start <= SHA_MAX and text[end] in HEX:
                end += 1
            if SHA_MIN <= end - start <= SHA_MAX:
                found.setdefault(text[start:end], None)
            at = text.find(COMMIT_PHRASE, end)
        if len(found) >= MAX_SHAS:
            break
    return list(found)


def named_number(body: str | None, head_ref: str | None, repo: str) -> int | None:
    """The PR number the revert button's signals name: the body's line first, then the branch."""
    found = in_body(body, repo)
    return found if found is not None else in_branch(head_ref)
