"""The fake GitHub the command-line tests point the CLI at, with the App installed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.fakes.github import FakeGitHub
from tests.loop_harness import _KEYS, APP_ID, INSTALLATION, REPO

# A personal token the fake accepts; tests check it never shows in an answer.
TOKEN = "ghp_thisIsTheSecretToken42"
GITHUB_SETTINGS = (
    "GITHUB_TOKEN",
    "GITHUB_APP_ID",
    "GITHUB_APP_PRIVATE_KEY",
    "GITHUB_APP_PRIVATE_KEY_FILE",
    "GITHUB_API_URL",
)


def as_app(monkeypatch: pytest.MonkeyPatch, app_id: int = APP_ID, key: str = _KEYS[0]) -> None:
    """Make the CLI act as the App (its id and private key)."""
    monkeypatch.setenv("GITHUB_APP_ID", str(app_id))
    monkeypatch.setenv("GITHUB_APP_PRIVATE_KEY", key)


@contextmanager
def fake_github(
    monkeypatch: pytest.MonkeyPatch, repo: str = REPO, installation: int = INSTALLATION
) -> Iterator[FakeGitHub]:
    """A fake GitHub with the App installed on ``repo`` and TOKEN valid; the CLI pointed at it
    with no credentials of the test process's own, and without request spacing."""
    fake = FakeGitHub(app_id=APP_ID, public_key=_KEYS[1])
    fake.start()
    fake.add_installation(installation)
    fake.add_repo(repo)
    fake.personal_tokens.add(TOKEN)
    for name in GITHUB_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GITHUB_API_URL", fake.url)
    monkeypatch.setenv("PLAYBOOK_GITHUB_SECONDS_BETWEEN_REQUESTS", "0")
    monkeypatch.setenv("PLAYBOOK_GITHUB_SECONDS_BETWEEN_WRITES", "0")
    try:
        yield fake
    finally:
        fake.stop()
