"""The documentation site builds with `mkdocs build --strict`: no broken link, anchor or page."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_site_builds_strictly(tmp_path: Path) -> None:
    """What `.ci/run` builds: a warning (a link to a missing page or anchor) fails it."""
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mkdocs is not installed: pip install '.[docs]'")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={"PATH": str(Path(sys.executable).parent), "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr[-4000:]
    assert (tmp_path / "reference" / "settings" / "index.html").is_file()
    assert (tmp_path / "reference" / "openapi.json").is_file()
