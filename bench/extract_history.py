"""A git repository's history as a compact extract: per commit its date, ticket keys and files.

Usage: python bench/extract_history.py REPO [--rev HEAD] [--project KEY] [--source NAME]
       [--licence SPDX] [--out FILE]

REPO is any git directory (a clone or a bare mirror). One JSON line per non-merge commit
reachable from ``--rev``, oldest first (by the committer's date), after a header line:

    {"meta": {"source": "apache/zookeeper", "head": "<sha>", "licence": "Apache-2.0", ...}}
    {"commit": "53a78e36f996", "date": "2026-07-17T18:55:25Z", "keys": ["ZOOKEEPER-5064"],
     "files": [["M", "pom.xml"], ["R", "new/path", "old/path"], ["A", "b"], ["D", "c"]]}

``date`` is the committer's date in UTC (when the change landed, as a PR's merge would be);
``keys`` are the Jira keys the commit's subject line names (only ``--project``'s when given,
at most MAX_KEYS), the ticket the commit fixed first; ``files`` are git's name-status with
rename detection (``-M``): A added, M modified, D deleted, R renamed (new path, then old).
A copy counts as an added file and a type change as a modification. Nothing else of the
message, and no code, is kept.

bench/data/zookeeper-history.jsonl.gz was made with:

    python bench/extract_history.py ZOOKEEPER_CLONE --project ZOOKEEPER \\
        --source apache/zookeeper --licence Apache-2.0 --out bench/data/zookeeper-history.jsonl.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

MAX_KEYS = 10
# A path longer than this is nobody's file (GitHub's limit is far below); such a line is dropped.
PATH_CHARS = 1000
SUBJECT_CHARS = 2000
_KEY = re.compile(r"\b([A-Z][A-Z0-9]{0,30})-([0-9]{1,9})\b")
# Separators in git's output: the format's own markers and -z's NULs.
_COMMIT, _FIELD = "\x01", "\x02"
_FORMAT = f"--format={_COMMIT}%H{_FIELD}%cI{_FIELD}%s{_FIELD}"
_STATUS = {"A": "A", "C": "A", "M": "M", "T": "M", "D": "D", "R": "R"}


def keys_in(subject: str, project: str | None = None) -> list[str]:
    """The Jira keys a commit subject names, in order, once each (``project``'s only if given)."""
    keys: dict[str, None] = {}
    for match in _KEY.finditer(subject[:SUBJECT_CHARS]):
        name, number = match.groups()
        if name == "CVE" or (project and name != project):
            continue  # CVE-2023-2976 is a vulnerability, not a ticket
        keys.setdefault(f"{name}-{int(number)}", None)
        if len(keys) >= MAX_KEYS:
            break
    return list(keys)


def parse(output: str, project: str | None = None) -> Iterator[dict[str, Any]]:
    """The commits of ``git log -z --name-status`` run with this module's format."""
    for chunk in output.split(_COMMIT)[1:]:
        sha, date, subject, rest = chunk.split(_FIELD, 3)
        tokens = [t for t in rest.lstrip("\0\n").split("\0") if t.strip("\n")]
        files: list[list[str]] = []
        i = 0
        while i < len(tokens):
            raw = tokens[i].strip("\n")
            status = _STATUS.get(raw[:1])
            paths = 2 if raw[:1] in ("R", "C") else 1
            names = tokens[i + 1 : i + 1 + paths]
            i += 1 + paths
            if status is None or len(names) < paths or any(len(n) > PATH_CHARS for n in names):
                continue
            if raw[:1] == "R":
                files.append(["R", names[1], names[0]])  # new path, then the old one
            else:
                files.append([status, names[-1]])
        yield {
            "commit": sha[:12],
            "date": utc(date),
            "keys": keys_in(subject, project),
            "files": files,
        }


def utc(stamp: str) -> str:
    """An ISO 8601 time with an offset as UTC, ``Z``-suffixed, to the second."""
    when = datetime.fromisoformat(stamp).astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def extract(repo: Path, rev: str = "HEAD", project: str | None = None) -> list[dict[str, Any]]:
    """The commits reachable from ``rev``, oldest first; merges left out (their parents say it)."""
    command = ["git", "-C", str(repo), "log", "--no-merges", "-M", "--name-status", "-z"]
    command += [_FORMAT, rev, "--"]
    done = subprocess.run(command, capture_output=True, check=True)
    commits = list(parse(done.stdout.decode("utf-8", "replace"), project))
    commits.reverse()
    commits.sort(key=lambda c: c["date"])  # stable: git's order among equal dates
    return commits


def head(repo: Path, rev: str) -> str:
    """The full commit hash ``rev`` names in ``repo``."""
    done = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", f"{rev}^{{commit}}"],
        capture_output=True,
        check=True,
        text=True,
    )
    return done.stdout.strip()


def write(path: Path, meta: dict[str, Any], commits: list[dict[str, Any]]) -> None:
    """The header line and one line per commit, gzip-compressed when ``path`` ends in .gz."""
    lines = [json.dumps({"meta": meta}, sort_keys=True)]
    lines += [json.dumps(c, separators=(",", ":"), ensure_ascii=False) for c in commits]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    if path.suffix == ".gz":
        # mtime=0: the same history makes the same bytes.
        with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
            out.write(data)
    else:
        path.write_bytes(data)


def main(argv: list[str] | None = None) -> int:
    """Make the extract; one line on stderr saying what was written."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path, help="a git repository (clone or bare mirror)")
    parser.add_argument("--rev", default="HEAD", help="the history's tip (default HEAD)")
    parser.add_argument("--project", default=None, help="keep only this Jira project's keys")
    parser.add_argument("--source", default=None, help="where the history is from (owner/name)")
    parser.add_argument("--licence", default=None, help="the repository's licence (SPDX)")
    parser.add_argument("--out", type=Path, default=Path("history.jsonl.gz"))
    args = parser.parse_args(argv)
    try:
        tip = head(args.repo, args.rev)
        commits = extract(args.repo, tip, args.project)
    except (OSError, subprocess.CalledProcessError) as error:
        detail = getattr(error, "stderr", "") or str(error)
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        parser.exit(2, f"extract_history: cannot read {args.repo}: {detail.strip()[:300]}\n")
    meta = {
        "source": args.source,
        "head": tip,
        "licence": args.licence,
        "commits": len(commits),
        "first": commits[0]["date"] if commits else None,
        "last": commits[-1]["date"] if commits else None,
        "made_by": "python bench/extract_history.py"
        + (f" --project {args.project}" if args.project else ""),
    }
    write(args.out, meta, commits)
    keyed = sum(1 for c in commits if c["keys"])
    print(
        f"extract_history: {len(commits):,} commits ({keyed:,} with a key) -> {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
