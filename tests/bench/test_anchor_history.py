"""The anchors bench: a history replayed through the stale flag and the search, counted by hand."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import anchor_history  # noqa: E402
import extract_history  # noqa: E402
import history  # noqa: E402

from playbook.anchors import stale  # noqa: E402

# Five commits of a made-up repository (2024-01-01 is a Monday):
# 1. ACME-1 changes two files: its lesson is anchored to both.
# 2. ACME-2 changes four files of docs/: anchored to docs/**.
# 3. no ticket: modifies src/orders/lock.py, flagging ACME-1 19 days after it was learned.
# 4. ACME-3 renames docs/a.md (flagging ACME-2 65 days on) and changes files in four
#    folders: no anchor.
# 5. ACME-4 deletes lock_test.py and renames lock.py (ACME-1 flagged again, its anchor
#    follows the rename); its own lesson is anchored to the file left.
COMMITS = [
    ("c1", "2024-01-01T10:00:00Z", ["ACME-1"], [["M", "src/orders/lock.py"]]),
    ("c2", "2024-01-10T10:00:00Z", ["ACME-2"], [["M", f"docs/{n}.md"] for n in "abcd"]),
    ("c3", "2024-01-20T10:00:00Z", [], [["M", "src/orders/lock.py"]]),
    (
        "c4",
        "2024-03-15T10:00:00Z",
        ["ACME-3"],
        [["R", "guide/a.md", "docs/a.md"], ["M", "web/x.js"], ["M", "api/y.py"], ["A", "z/q.py"]],
    ),
    (
        "c5",
        "2024-06-01T10:00:00Z",
        ["ACME-4"],
        [["D", "src/orders/lock_test.py"], ["R", "src/orders/locking.py", "src/orders/lock.py"]],
    ),
]
COMMITS[0][3].append(["A", "src/orders/lock_test.py"])
# The tickets: ACME-3 and ACME-4 name a path; ACME-4 shares no word with ACME-1's lesson,
# which only its anchor finds.
TICKETS = [
    ("ACME-1", "2023-12-20", "Deadlock when two carts pay at once", None),
    ("ACME-2", "2024-01-05", "Docs index broken", None),
    ("ACME-3", "2024-03-01", "Guide moved", "docs/a.md should move to the guide"),
    ("ACME-4", "2024-05-01", "Checkout hangs after release", "See src/orders/lock.py line 40."),
]


def write_history(folder: Path) -> Path:
    path = folder / "history.jsonl"
    lines = [json.dumps({"meta": {"source": "acme/shop", "head": "c5" * 20, "licence": "MIT"}})]
    for sha, date, keys, files in COMMITS:
        lines.append(json.dumps({"commit": sha, "date": date, "keys": keys, "files": files}))
    path.write_text("\n".join(lines) + "\n")
    return path


def write_tickets(folder: Path) -> Path:
    path = folder / "tickets.jsonl"
    rows = [
        {
            "key": key,
            "project": "ACME",
            "created": f"{day}T09:00:00.000+0000",
            "summary": summary,
            "description": description,
            "labels": [],
            "components": [],
            "links": [],
        }
        for key, day, summary, description in TICKETS
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("acme")
    argv = ["--history", str(write_history(folder)), "--dataset", str(write_tickets(folder))]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        returned = anchor_history.main([*argv, "--json"])
    printed = json.loads(out.getvalue())
    assert printed == json.loads(json.dumps(returned))
    return printed


def test_the_five_commits_give_the_numbers_counted_by_hand(report: dict[str, Any]) -> None:
    s = report["staleness"]
    assert (s["lessons"], s["anchored"]) == (4, 3)
    assert s["by_rule"] == {"files": 2, "folder": 1, "none": 1}
    # ACME-1 touched 19 days on, ACME-2 65 days on; ACME-4 is too young to count.
    assert s["touched_again"]["30 days"] == {
        "lessons": 2,
        "any commit": 0.5,
        "another ticket's commit": 0.5,
    }
    assert s["touched_again"]["90 days"]["any commit"] == 1.0
    assert (s["flags"], s["flags_by_same_ticket"]) == (3, 0)
    # Two flags over ACME-1's and ACME-4's 152 + 1 days; one over ACME-2's 143.
    assert s["by_anchor_kind"] == {
        "files": {"lessons": 2, "touched within 30 days": 1.0, "flags per lesson-year": 4.77},
        "folder": {"lessons": 1, "touched within 30 days": 0.0, "flags per lesson-year": 2.55},
    }
    # 22 weeks from 1 January to the week of 1 June; one flagged lesson listed in three.
    weekly = s["listed_per_week"]["whole history"]
    assert (weekly["weeks"], weekly["median"], weekly["max"], weekly["mean"]) == (22, 0, 1, 0.14)
    assert s["flagged_if_never_cleared"] == {
        "at the end": 2,
        "share of anchored": 0.6667,
        "flagged in the last 3 years": 2,
    }
    assert (s["renames_followed"], s["every_file_gone"]) == (1, 0)
    assert s["anchors_naming_nothing_at_the_end"] == 0


def test_the_anchor_finds_the_lesson_the_words_miss(report: dict[str, Any]) -> None:
    p = report["precision"]
    assert p["searched"] == 4
    folder = p["senses"]["by file or folder"]
    every = folder["ranks"]["every ticket with a right lesson"]
    # ACME-3 finds ACME-2 both ways (it says "docs"); ACME-4 finds ACME-1 only by its anchor.
    assert every["tickets"] == 2
    assert every["with_anchors"]["top 1"] == 1.0
    assert every["without"]["top 1"] == 0.5
    by_file = p["senses"]["by file"]["ranks"]["every ticket with a right lesson"]
    assert (by_file["tickets"], by_file["with_anchors"]["top 1"], by_file["without"]["top 10"]) == (
        1,
        1.0,
        0.0,
    )
    assert (p["anchored_hits"], p["tickets_with_an_anchored_hit"]) == (2, 2)
    assert folder["anchored_hits_right"] == 1.0
    assert p["senses"]["by file"]["anchored_hits_right"] == 0.5
    assert report["naming"]["tickets"] == 4
    assert report["naming"]["paths"] == 0.5


def test_the_report_says_what_it_replayed_and_where(report: dict[str, Any]) -> None:
    assert report["history"]["project"] == "ACME"
    assert report["history"]["commits"] == 5
    assert report["history"]["with a ticket"] == 4
    assert {"cpus", "python", "sqlite"} <= report["machine"].keys()
    assert report["command"].startswith("python bench/anchor_history.py --history ")


def test_capture_follows_the_issues_rule() -> None:
    def change(path: str, status: str = "modified") -> stale.FileChange:
        return stale.FileChange(status, path)

    few = [change("a/x.py"), change("b/y.py"), change("gone.py", stale.REMOVED)]
    assert history.capture(few) == ("files", ["a/x.py", "b/y.py"])
    deep = [change(f"src/orders/{n}.py") for n in "abcd"] + [change("src/orders/sub/e.py")]
    assert history.capture(deep) == ("folder", ["src/orders/**"])
    spread = [change("a/1.py"), change("a/2.py"), change("b/3.py"), change("setup.py")]
    assert history.capture(spread) == ("folders", ["a/**", "b/**", "setup.py"])
    wide = [change(f"{n}/x.py") for n in "abcd"]
    assert history.capture(wide) == ("none", [])
    # A busy file (a changelog every change touches) is no lesson's anchor.
    assert history.capture([change("CHANGES.txt"), change("a/x.py")], {"CHANGES.txt"}) == (
        "files",
        ["a/x.py"],
    )


def test_the_markdown_report_names_the_command_the_machine_and_the_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    anchor_history.main(
        ["--history", str(write_history(tmp_path)), "--dataset", str(write_tickets(tmp_path))]
    )
    out = capsys.readouterr().out
    assert out.startswith("# Lessons anchored to code, on a real history\n")
    assert "command: `python bench/anchor_history.py --history " in out
    assert "cores" in out
    assert "| 30 days | 2 | 50.0% | 50.0% |" in out
    assert "| whole history | 22 | 0 | 1 | 1 | 0.14 |" in out


def test_a_broken_history_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text('{"commit": "c1", "date": "2024-01-01T00:00:00Z", "keys": []}\n')
    with pytest.raises(SystemExit) as raised:
        anchor_history.main(["--history", str(path), "--generated"])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert "--history: history.jsonl line 1: no 'files' field" in err
    assert "Traceback" not in err


@pytest.mark.slow
def test_the_shipped_extract_replays_on_a_slice() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        report = anchor_history.main(["--limit", "300", "--generated", "--json"])
    assert report["history"]["source"] == "apache/zookeeper"
    assert report["history"]["licence"] == "Apache-2.0"
    assert report["history"]["commits"] == 300
    s = report["staleness"]
    assert 0 < s["anchored"] <= s["lessons"]
    for window in s["touched_again"].values():
        assert window["any commit"] is None or 0.0 <= window["any commit"] <= 1.0
    assert s["listed_per_week"]["whole history"]["weeks"] > 0


NO_SIGNING = ("-c", "commit.gpgsign=false")


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_extract_keeps_dates_keys_and_file_statuses_of_any_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str, when: str = "2024-01-01T10:00:00+02:00") -> None:
        env = {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "HOME": str(tmp_path)}
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@e", *NO_SIGNING, *args],
            cwd=repo,
            check=True,
            capture_output=True,
            env={**os.environ, **env, "GIT_CONFIG_NOSYSTEM": "1"},
        )

    git("init", "-q")
    (repo / "a.py").write_text("one\n" * 20)
    (repo / "b.py").write_text("two\n")
    git("add", "-A")
    git("commit", "-qm", "ACME-7: first (fixes CVE-2023-1234, see ACME-2)")
    git("mv", "a.py", "pkg_a.py")
    git("rm", "-q", "b.py")
    git(
        "commit",
        "-qm",
        "no ticket here\n\nACME-9 in the body is not read",
        when="2024-02-01T00:00:00Z",
    )
    out = tmp_path / "x.jsonl.gz"
    assert extract_history.main([str(repo), "--project", "ACME", "--out", str(out)]) == 0
    with gzip.open(out, "rt") as lines:
        rows = [json.loads(line) for line in lines]
    assert rows[0]["meta"]["commits"] == 2
    first, second = rows[1], rows[2]
    assert first["date"] == "2024-01-01T08:00:00Z"
    assert first["keys"] == ["ACME-7", "ACME-2"]
    assert first["files"] == [["A", "a.py"], ["A", "b.py"]]
    assert second["keys"] == []
    assert sorted(second["files"]) == [["D", "b.py"], ["R", "pkg_a.py", "a.py"]]
    meta, commits = history.load(out)
    assert meta["commits"] == 2
    assert stale.FileChange("renamed", "pkg_a.py", "a.py") in commits[1].changes
