"""`playbook-bot serve` with no GitHub App: it prints the setup page's one-time address."""

from __future__ import annotations

import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.serve_process import clean_env, console, free_port
from tests.support import wait_until_up

pytestmark = pytest.mark.slow


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _status(url: str) -> tuple[int, str]:
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(url, timeout=10) as response:
            return response.status, response.headers.get("Location", "")
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Location", "")


def test_serve_without_an_app_prints_the_setup_address(tmp_path: Path) -> None:
    port = free_port()
    env = clean_env()
    process = subprocess.Popen(
        [*console(), "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, process)
        token = (tmp_path / "setup-token").read_text().strip()
        assert _status(f"{url}/") == (302, "/setup")
        assert _status(f"{url}/setup")[0] == 403
        assert _status(f"{url}/setup?token={token}") == (303, "/setup")
    finally:
        process.terminate()
        out, err = process.communicate(timeout=30)
    printed = out + err
    assert f"open {url}/setup?token={token}" in printed
    assert (tmp_path / "setup-token").stat().st_mode & 0o077 == 0
