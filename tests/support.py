"""Helpers shared by tests: fixture payloads and the secrets tests sign them with."""

from __future__ import annotations

import json
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
GITHUB_SECRET = "It's a Secret to Everybody"
JIRA_SECRET = "jira-webhook-secret"


def fixture_body(name: str, **changes: object) -> bytes:
    """A fixture payload (``issues.opened``, ``jira.issue_created``) as raw JSON bytes."""
    folder = "jira" if name.startswith("jira.") else "github"
    payload = json.loads((FIXTURES / folder / f"{name}.json").read_text())
    payload.update(changes)
    return json.dumps(payload).encode()
