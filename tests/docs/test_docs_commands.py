"""Every shell command the README and the docs show as runnable runs, and prints what they show."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.docs.console_blocks import (
    DEMO_LESSONS,
    NO_PLAYBOOK,
    Block,
    blocks,
    clean_environment,
    matches,
    run,
)

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").rglob("*.md"))


def runnable(path: Path) -> list[Block]:
    """The page's blocks that are run."""
    return [
        block
        for block in blocks(path)
        if block.skipped is None and (block.commands or block.writes is not None)
    ]


def test_every_shell_block_is_run_or_says_why() -> None:
    """A shell example is either run (a ```console block of `$ ` lines) or marked as not run
    with the reason, so no command a reader may copy goes unchecked by accident."""
    unmarked = [
        f"{block.path.relative_to(ROOT)}:{block.line} ({block.language})"
        for path in [README, *PAGES]
        for block in blocks(path)
        if block.skipped is None
        and block.writes is None
        and block.printed_by is None
        and (block.language != "console" or not block.commands)
    ]
    assert not unmarked, (
        "shell blocks neither run nor marked: make them ```console blocks of `$ ` lines, or put"
        f" `<!-- not run: why -->` before them: {unmarked}"
    )


def test_quoted_samples_are_in_the_output_shown() -> None:
    """A sample quoted apart from its command (the README's comment) is, line for line, in the
    output the page shows for that command, which the slow tests check against a real run."""
    for path in [README, *PAGES]:
        found = blocks(path)
        for sample in (block for block in found if block.printed_by):
            shown = [
                "\n".join(command.shown)
                for block in found
                for command in block.commands
                if command.text == sample.printed_by
            ]
            assert shown, f"{path.name}:{sample.line}: no `$ {sample.printed_by}` on the page"
            assert any(sample.text.rstrip("\n") in output for output in shown), (
                f"{path.name}:{sample.line}: the sample is not in what `{sample.printed_by}` shows"
            )


def check_page(path: Path, workdir: Path) -> None:
    """Run ``path``'s blocks in order in ``workdir``; fail on the first command that differs."""
    home = workdir.parent / f"{workdir.name}-home"
    home.mkdir(exist_ok=True)
    env = clean_environment(home)
    env["PWD"] = str(workdir)
    if path != README:
        # This checkout's code, whatever checkout the virtualenv's install points at. The
        # README's commands install their own copy instead.
        env["PYTHONPATH"] = str(ROOT)
    state = workdir.parent / f"{workdir.name}-env"
    page = path.read_text(encoding="utf-8")
    if NO_PLAYBOOK not in page and path != README:
        playbook_bot(["db", "upgrade"], workdir, env)
    if DEMO_LESSONS in page:
        seed_demo_lessons(workdir, env)
    for block in runnable(path):
        if block.writes is not None:
            (Path(env["PWD"]) / block.writes).write_text(block.text, encoding="utf-8")
        for command in block.commands:
            status, output, env = run(command, env, state)
            where = f"{path.relative_to(ROOT)}:{command.line}: $ {command.text}"
            if command.shown:
                assert matches(command.shown, output), (
                    f"{where}\n--- the page shows:\n"
                    + "\n".join(command.shown)
                    + f"\n--- it printed (exit {status}):\n"
                    + "\n".join(output)
                )
            else:
                assert status == 0, f"{where}\nexited {status}:\n" + "\n".join(output)


def seed_demo_lessons(workdir: Path, env: dict[str, str]) -> None:
    """The demo's dozen lessons in the page's playbook, imported as a user would."""
    from webhooks.demo import LESSONS

    entries = [
        {"text": text, "learned_from": learned_from, "scope": scope, "tags": list(tags)}
        for text, learned_from, scope, tags in LESSONS
    ]
    (workdir / "demo-lessons.yaml").write_text(yaml.safe_dump(entries), encoding="utf-8")
    playbook_bot(["import", "demo-lessons.yaml"], workdir, env)


def playbook_bot(args: list[str], workdir: Path, env: dict[str, str]) -> None:
    """A setup step the page does not show; its output is not the page's business."""
    subprocess.run(
        ["playbook-bot", *args], cwd=workdir, env=env, check=True, capture_output=True, timeout=120
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "page",
    [path for path in PAGES if runnable(path)],
    ids=lambda path: str(path.relative_to(ROOT / "docs")),
)
def test_docs_page_commands(page: Path, tmp_path: Path) -> None:
    """Each page's commands, in a fresh directory with a fresh SQLite playbook."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    check_page(page, workdir)


@pytest.mark.slow
def test_readme_commands(tmp_path: Path) -> None:
    """The README's commands in a fresh copy of the repository, virtualenv and install included."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the repository's files cannot be listed")
    clone = tmp_path / "playbook-bot"
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, clone / name)
    check_page(README, clone)
