"""`serve`'s start-up line for people: the web page's address and how to log in, naming the
variable that holds the token and never its value."""

from __future__ import annotations

import pytest

from bot.cli.service import web_page
from bot.config import Settings

TOKEN = "s3cret-maintainer-token-42"


def settings(token: str | None = None, public: bool = False) -> Settings:
    return Settings(_env_file=None, PLAYBOOK_API_TOKEN=token, PLAYBOOK_UI_PUBLIC_READ=public)


@pytest.mark.parametrize(
    ("token", "public", "said"),
    [
        (TOKEN, False, "log in with the token in PLAYBOOK_API_TOKEN"),
        (
            TOKEN,
            True,
            "read-only pages open to anyone (PLAYBOOK_UI_PUBLIC_READ); log in with the token in "
            "PLAYBOOK_API_TOKEN to change things",
        ),
        (
            None,
            True,
            "read-only pages open to anyone (PLAYBOOK_UI_PUBLIC_READ); no login until "
            "PLAYBOOK_API_TOKEN is set",
        ),
        (
            None,
            False,
            "logins are off: set PLAYBOOK_API_TOKEN to a token of your choosing, restart, and "
            "log in with it (or PLAYBOOK_UI_PUBLIC_READ=true to read without one)",
        ),
    ],
    ids=["token", "token and public", "public", "neither"],
)
def test_the_line_says_how_to_log_in(token: str | None, public: bool, said: str) -> None:
    line = web_page(settings(token, public), "127.0.0.1", 8080)
    assert line == f"web page: http://127.0.0.1:8080/ui/; {said}"
    assert TOKEN not in line


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("0.0.0.0", "http://localhost:9000/ui/ (or this machine's name)"),
        ("::", "http://localhost:9000/ui/ (or this machine's name)"),
        ("::1", "http://[::1]:9000/ui/"),
        ("bot.internal", "http://bot.internal:9000/ui/"),
    ],
)
def test_the_address_is_one_a_browser_opens(host: str, address: str) -> None:
    assert web_page(settings(TOKEN), host, 9000).startswith(f"web page: {address}; ")
