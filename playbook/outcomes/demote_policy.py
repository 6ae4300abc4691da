"""When a pull request closed unmerged demotes its tickets' lessons: the setting's values.

Kept apart from the outcome rule so that reading the settings loads nothing of the rule.
"""

from __future__ import annotations

from enum import StrEnum


class DemotePolicy(StrEnum):
    """When a PR closed unmerged demotes the lessons of its tickets (PLAYBOOK_DEMOTE_POLICY)."""

    ALWAYS = "always"
    NEEDS_REVIEW = "needs-review"  # only when the PR or a ticket is flagged for human review
