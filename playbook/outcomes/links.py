"""Finding references in text: Jira keys, closed GitHub issues, and bullet ids."""

from __future__ import annotations

import re
from dataclasses import dataclass

from playbook.lessons import ids
from playbook.outcomes.pull_reach import may_link

# GitHub caps PR titles at 256 characters and bodies at 65,536; branch names are shorter still.
# Reading no more than this bounds the work whatever a PR holds.
TITLE_CHARS = 1_024
BRANCH_CHARS = 1_024
BODY_CHARS = 65_536
# The patterns below read untrusted text, so each runs in linear time: possessive quantifiers
# (`*+`, `++`) never give back what the rest of the pattern could not use, and the lookbehinds
# let an attempt start only where a word starts, so no run of characters is read from two starts.
# Numbers are ASCII digits only (see playbook/lessons/ids.py): Arabic-Indic digits close no issue.
BULLET_ID = ids.MENTION
# Atlassian's convention: a project key (letter, then letters/digits) and a number.
JIRA_KEY = re.compile(r"(?<![\w-])([A-Z][A-Z0-9]++-[0-9]++)(?![\w-])")
# Branch names are usually lower case (ctms-4337-fix-retries), so match them case-insensitively.
JIRA_KEY_ANY_CASE = re.compile(r"(?<![A-Za-z0-9])([A-Za-z][A-Za-z0-9]++-[0-9]++)(?![0-9])")
CLOSING = r"(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)"
# "Fixes #1", "closes: #1": `(?:\s*+:)?\s++` where `\s*:?\s+` would try every split of a run of
# spaces between its two `\s`.
CLOSES_ISSUE = re.compile(
    rf"\b{CLOSING}(?:\s*+:)?\s++(?:([A-Za-z0-9_.-]++/[A-Za-z0-9_.-]++))?#([0-9]++)\b",
    re.IGNORECASE,
)
CLOSES_JIRA = re.compile(
    rf"\b{CLOSING}(?:\s*+:)?\s++([A-Za-z][A-Za-z0-9]++-[0-9]++)\b", re.IGNORECASE
)
# Keys that look like Jira keys but name encodings and algorithms.
NOT_KEYS = re.compile(r"^(UTF|SHA|ISO|RFC|MD|CVE|PEP|HTTP|TLS|X)-", re.IGNORECASE)


def bullet_ids(text: str | None) -> list[str]:
    """Bullet ids mentioned in text (``pb-12``, ``[PB-12]``), normalised, in order, once each."""
    return ids.mentioned(text)


def _keys(pattern: re.Pattern[str], text: str | None) -> list[str]:
    found: dict[str, None] = {}
    for match in pattern.finditer(text or ""):
        key = match.group(1).upper()
        if not key.startswith("PB-") and not NOT_KEYS.match(key):
            found.setdefault(key, None)
    return list(found)


@dataclass(frozen=True)
class PullRequestLinks:
    """The tickets a pull request is about."""

    jira_keys: tuple[str, ...]
    closes: tuple[str, ...]  # GitHub issues, as owner/repo#n

    @property
    def tickets(self) -> tuple[str, ...]:
        """Every linked ticket key: Jira keys, then closed GitHub issues."""
        return (*self.jira_keys, *self.closes)


def pull_request_links(title: str, branch: str, body: str | None, repo: str) -> PullRequestLinks:
    """Tickets a PR links to, by the convention of Atlassian's GitHub integration.

    Jira keys come from the title, the head branch and the body, upper-cased and
    deduplicated; bullet ids are never keys. When the body names keys with a closing
    keyword (``Fixes CTMS-1``), only those count: an explicit link beats loose mentions.
    A closed GitHub issue counts only of ``repo``'s owner (`pull_reach.may_link`): its
    outcome moves the lessons learned from the issue, and another owner's are not its to move.
    """
    title, branch, body = title[:TITLE_CHARS], branch[:BRANCH_CHARS], (body or "")[:BODY_CHARS]
    closing_jira = _keys(CLOSES_JIRA, body) + _keys(CLOSES_JIRA, title)
    if closing_jira:
        jira = list(dict.fromkeys(closing_jira))
    else:
        jira = list(
            dict.fromkeys(
                _keys(JIRA_KEY, title) + _keys(JIRA_KEY_ANY_CASE, branch) + _keys(JIRA_KEY, body)
            )
        )
    closes: dict[str, None] = {}
    for text in (title, body):
        for match in CLOSES_ISSUE.finditer(text):
            ticket = f"{match.group(1) or repo}#{int(match.group(2))}"
            if may_link(repo, ticket):
                closes.setdefault(ticket, None)
    return PullRequestLinks(jira_keys=tuple(jira), closes=tuple(closes))
