"""The README stays a front door: short, and every link in it leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
# [text](target) with a relative target: a file of the repository, maybe with an anchor.
LINK = re.compile(r"\]\((?!https?://|#)([^)#\s]+)(#[^)]*)?\)")


def test_readme_is_at_most_200_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail into docs/"


def test_readme_links_lead_to_files_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    targets = {match.group(1) for match in LINK.finditer(text)}
    assert targets, "the README links into the docs"
    missing = sorted(target for target in targets if not (ROOT / target).exists())
    assert not missing, f"README.md links to missing files: {missing}"


def test_readme_states_the_python_the_package_requires() -> None:
    """The version the README asks for is pyproject's requires-python."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    version = project["requires-python"].removeprefix(">=")
    assert f"Python {version} or newer" in README.read_text(encoding="utf-8")
