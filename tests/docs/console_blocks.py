"""The docs' shell examples: which are run, how their shown output is compared.

The convention (docs/development.md, "The docs' commands"):

- A ```console block is run: each line starting `$ ` is a command (continued on lines starting
  `> `, or after a trailing backslash), the lines after it up to the next `$ ` are its output
  (stdout and stderr as a terminal shows them).
- A line `...` alone stands for any number of lines; `...` inside a line for any text (dates,
  timings, ids). A command with no output shown may print anything, but must exit 0; one with
  output shown may fail, as long as the output is what the page shows.
- Any shell block (console, sh, bash, shell) preceded by `<!-- not run: why -->` is not run;
  a sh/bash/shell block without it fails the test (show commands as ```console to run them).
- A page starts with an empty playbook (its schema created), unless it says
  `<!-- docs-test: no-playbook -->`: then its first command meets no database, as a new user's.
- `<!-- docs-test: demo-lessons -->` anywhere on a page seeds its playbook with the demo's
  lessons before its first block.
- `<!-- docs-test: printed by COMMAND -->` before a block says its lines are part of what the
  page shows `$ COMMAND` printing (a sample quoted before the command is run).
- `<!-- docs-test: file NAME -->` before a block of any language writes the block, as shown,
  to the file NAME of the page's directory when the page's run reaches it.

A page's blocks run in order in one temporary directory with its own SQLite playbook, so a
later block sees what an earlier one did; `cd` and `export` carry over from one command to the
next, as in a terminal.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

SHELLS = {"console", "sh", "bash", "shell"}
NOT_RUN = re.compile(r"^<!-- not run: \S.* -->$")
DEMO_LESSONS = "<!-- docs-test: demo-lessons -->"
NO_PLAYBOOK = "<!-- docs-test: no-playbook -->"
WRITES_FILE = re.compile(r"^<!-- docs-test: file (\S+) -->$")
PRINTED_BY = re.compile(r"^<!-- docs-test: printed by (.+) -->$")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
ELLIPSIS = "..."
# Catches a hang, not a slow machine: the slowest command shown (`pip install .`) takes well
# under a minute here.
COMMAND_TIMEOUT = 300


@dataclass
class Command:
    """One `$ ` line and the output shown under it."""

    line: int
    text: str
    shown: list[str] = field(default_factory=list)


@dataclass
class Block:
    """A fenced shell block of a page."""

    path: Path
    line: int
    language: str
    skipped: str | None
    commands: list[Command]
    # The file this block's text is written to (`<!-- docs-test: file NAME -->`), and the text.
    writes: str | None = None
    text: str = ""
    # The command whose output, as the page shows it, holds this block's lines.
    printed_by: str | None = None


def blocks(path: Path) -> list[Block]:
    """The shell blocks of one Markdown file, in order, each with its commands."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, language = opening.groups()
        body_start = index + 1
        index += 1
        while index < len(lines) and lines[index].strip() != "```":
            index += 1
        body = [line.removeprefix(indent) for line in lines[body_start:index]]
        index += 1
        before = next(
            (line.strip() for line in reversed(lines[: body_start - 1]) if line.strip()), ""
        )
        if written := WRITES_FILE.match(before):
            text = "".join(line + "\n" for line in body)
            found.append(Block(path, body_start, language, None, [], written.group(1), text))
            continue
        if printed := PRINTED_BY.match(before):
            text = "".join(line + "\n" for line in body)
            found.append(Block(path, body_start, language, None, [], None, text, printed.group(1)))
            continue
        if language not in SHELLS:
            continue
        skipped = before if NOT_RUN.match(before) else None
        commands: list[Command] = []
        for number, line in enumerate(body, start=body_start + 1):
            last = commands[-1] if commands else None
            if line.startswith("$ "):
                commands.append(Command(number, line[2:]))
            elif last and not last.shown and (line.startswith("> ") or last.text.endswith("\\")):
                # A command's next line: bash's `> ` prompt, or after a trailing backslash.
                last.text += "\n" + line.removeprefix("> ")
            elif last:
                last.shown.append(line)
        found.append(Block(path, body_start, language, skipped, commands))
    return found


def _line_pattern(shown: str) -> re.Pattern[str]:
    """A shown line as a pattern: `...` inside it matches any text."""
    parts = [re.escape(part) for part in shown.rstrip().split(ELLIPSIS)]
    return re.compile(".*?".join(parts) + r"\s*")


def matches(shown: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` lines are what ``shown`` lines show, wildcards included."""
    if not shown:
        return not actual
    head, rest = shown[0], shown[1:]
    if head.strip() == ELLIPSIS:
        return any(matches(rest, actual[skip:]) for skip in range(len(actual) + 1))
    return (
        bool(actual)
        and bool(_line_pattern(head).fullmatch(actual[0].rstrip()))
        and matches(rest, actual[1:])
    )


def clean_environment(home: Path) -> dict[str, str]:
    """The environment a new user's shell would have: no setting of this machine's bot."""
    keep = {"PATH", "LANG", "LC_ALL", "TERM", "SYSTEMROOT", "TMPDIR"}
    env = {name: value for name, value in os.environ.items() if name in keep}
    # This interpreter's scripts first: `playbook-bot` is the one under test.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(HOME=str(home), USER="alice", LOGNAME="alice", COLUMNS="100")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run(
    command: Command, env: dict[str, str], state: Path
) -> tuple[int, list[str], dict[str, str]]:
    """Run one command in bash; its exit status, its output lines and the environment after it
    (so `cd`, `export` and `. .venv/bin/activate` carry over to the next command)."""
    script = f'{command.text}\n__status=$?\nenv -0 > "{state}"\nexit $__status\n'
    finished = subprocess.run(
        ["bash", "-c", script],
        cwd=env["PWD"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )
    after = dict(env)
    if state.exists():
        pairs = state.read_text().split("\0")
        after = dict(pair.split("=", 1) for pair in pairs if "=" in pair)
        state.unlink()
    return finished.returncode, finished.stdout.splitlines(), after
