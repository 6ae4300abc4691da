"""Why the bot deprecates a lesson by itself: the ``demoted_reason``s no maintainer writes."""

from __future__ import annotations

# A PR for the lesson's ticket closed unmerged (`playbook.outcomes.pull_outcome`). Only a
# lesson demoted for this reason comes back when a later PR for the ticket merges.
UNMERGED = "pr_closed_unmerged"
# The lesson's PR was reverted: ``reverted (owner/repo#M)`` (`playbook.outcomes.reverts`). A
# later PR for the ticket merging brings it back too, as reverting the revert does.
REVERTED = "reverted ("
# The holdout measured the lesson harmful (`playbook.upkeep.prune`).
MEASURED_HARMFUL = "measured_harmful"


def automatic(demoted_reason: object) -> bool:
    """Whether a deprecation with this ``demoted_reason`` was the bot's own decision."""
    if not isinstance(demoted_reason, str):
        return False
    return demoted_reason in (UNMERGED, MEASURED_HARMFUL) or demoted_reason.startswith(REVERTED)
