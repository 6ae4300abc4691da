"""From the demo to a filled web page, as a newcomer runs it: `demo --keep PATH`, then the
command it prints, then the address `serve` names, in real processes."""

from __future__ import annotations

import shlex
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.serve_process import clean_env, console, serving

pytestmark = pytest.mark.slow

TOKEN = "s3cret-maintainer-token-42"


def printed_command(stdout: str) -> tuple[dict[str, str], list[str]]:
    """The variables and the words of the command the demo said to run next."""
    lines = stdout.splitlines()
    intro = next(n for n, line in enumerate(lines) if line.startswith("See it on the web page"))
    words = shlex.split(lines[intro + 1])
    variables = dict(word.split("=", 1) for word in words if "=" in word)
    return variables, [word for word in words if "=" not in word]


def serve(cwd: Path, env: dict[str, str], argv: list[str]) -> tuple[int, str, str]:
    """Serve until /ui/ answered; its status, its page and the server's log."""
    assert argv[1] == "serve", argv
    log = cwd / "server.log"
    seen = log.stat().st_size if log.exists() else 0
    with (
        serving(cwd, env, *argv[2:]) as url,
        urllib.request.urlopen(f"{url}/ui/", timeout=10) as answer,
    ):
        status, page = answer.status, answer.read().decode()
    port = url.rsplit(":", 1)[1]
    return status, page, log.read_text()[seen:].replace(f":{port}/", ":PORT/")


def test_the_kept_demo_is_served_on_a_filled_web_page(tmp_path: Path) -> None:
    demo = subprocess.run(
        [*console(), "demo", "--quiet", "--keep", "demo.db"],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    variables, argv = printed_command(demo.stdout)
    assert argv == ["playbook-bot", "serve"]
    assert variables["PLAYBOOK_DATABASE_URL"] == f"sqlite:///{tmp_path / 'demo.db'}"

    status, page, log = serve(tmp_path / "..", clean_env() | variables, argv)
    assert status == 200
    assert "Never call the payment provider while holding a database row lock" in page
    assert (
        "web page: http://127.0.0.1:PORT/ui/; read-only pages open to anyone "
        "(PLAYBOOK_UI_PUBLIC_READ); no login until PLAYBOOK_API_TOKEN is set\n"
    ) in log

    # With a token, the line names the variable to log in with, never the token.
    with_token = clean_env() | variables | {"PLAYBOOK_API_TOKEN": TOKEN}
    _status, _page, log = serve(tmp_path, with_token, argv)
    assert "web page: http://127.0.0.1:PORT/ui/; read-only pages open to anyone" in log
    assert "log in with the token in PLAYBOOK_API_TOKEN to change things\n" in log
    assert TOKEN not in log
