"""The AGENTS.md sync's plan (the block and the path-scoped files it wants) and its PR's text."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.agents_md_files import FilesPlan
from playbook.lessons.markdown import markdown_text
from playbook.repos.settings import FILE_PATH
from playbook.repos.syncs import BRANCH
from playbook.rules import END, START, block
from playbook.scopes import GLOBAL

# Rows listed per table in the PR description: GitHub cuts a description at 65,536 characters.
MAX_ROWS = 50
EXCERPT = 90


@dataclass(frozen=True)
class SyncPlan:
    """The block wanted in the file and the path-scoped files, and how they differ from the
    default branch's."""

    entries: list[block.Entry]  # every lesson chosen: the block's and the area files'
    text: str  # the block
    desired: bytes
    existing: bytes | None
    change: block.Change
    removed: dict[str, str]
    # Against the open PR's previous version (None without one): what this update changes.
    since: block.Change | None = None
    files: FilesPlan = field(default_factory=FilesPlan)


def describe(
    repo: str, path: str, plan: SyncPlan, max_chars: int, pause_days: int, scope: str
) -> tuple[str, str]:
    """The sync PR's title and description: which lessons came and went, and why."""
    change = plan.change
    where = files_in(path, plan)
    title = (
        f"playbook-bot: {lessons_count(len(plan.entries))} for agents in {where} "
        f"(+{len(change.added)}, -{len(change.removed)})"
    )
    scopes = f"`{scope}`" + (f" and `{GLOBAL}`" if scope != GLOBAL else "")
    lines = [
        f"This pull request updates the block of lessons playbook-bot keeps in `{path}`, "
        f"between `{START}` and `{END}`: the most helpful active lessons of {scopes} "
        f"(most cited in merged work first) that fit in {max_chars:,} characters. "
        "Agents that read the file see them; citing a lesson's id in a pull request counts "
        "as usual. Text outside the markers is not changed.",
        "",
        f"### Added ({len(change.added)})",
    ]
    if change.added:
        lines += ["", "| Lesson | Text | Why |", "|---|---|---|"]
        for entry in change.added[:MAX_ROWS]:
            lines.append(f"| {entry.bullet_id} | {_cell(entry.text)} | {_cell(entry.reason)} |")
        lines += _more(len(change.added))
    else:
        lines.append("None.")
    lines += ["", f"### Removed ({len(change.removed)})"]
    if change.removed:
        lines += ["", "| Lesson | Why |", "|---|---|"]
        for bullet_id in change.removed[:MAX_ROWS]:
            lines.append(f"| {bullet_id} | {_cell(plan.removed.get(bullet_id, ''))} |")
        lines += _more(len(change.removed))
    else:
        lines.append("None.")
    if change.kept:
        lines += ["", f"Kept ({len(change.kept)}): {', '.join(change.kept[:200])}"]
    since = plan.since
    if since is not None and (since.added or since.removed):
        # A reviewer who read the earlier version needs only what this update changed.
        lines += ["", "### Since the previous version of this pull request", ""]
        lines += [f"- added {e.bullet_id}: {_cell(e.reason)}" for e in since.added[:MAX_ROWS]]
        lines += [
            f"- removed {bullet_id}: {_cell(plan.removed.get(bullet_id, ''))}"
            for bullet_id in since.removed[:MAX_ROWS]
        ]
    lines += _files_section(path, plan)
    lines += [
        "",
        "### Pausing or stopping",
        "",
        f"- Close this pull request without merging it to pause the sync for {pause_days} days "
        "(a close pauses it only when made by someone with write access to this repository; "
        f"`playbook-bot agents-md sync --repo {repo} --resume` resumes it sooner).",
        f"- Set `agents_md: {{enabled: false}}` in `{FILE_PATH}` to stop it.",
        "- Merge it to keep these lessons; the bot opens a new pull request when they change, "
        f"always from the branch `{BRANCH}`.",
    ]
    return title, "\n".join(lines)


def files_in(path: str, plan: SyncPlan) -> str:
    """Where the plan's lessons go: "AGENTS.md", or "AGENTS.md and 6 path-scoped files"."""
    count = len(plan.files.wanted)
    return path + (f" and {count} path-scoped file{'s' if count != 1 else ''}" if count else "")


def lessons_count(count: int) -> str:
    """``count`` lessons, in words: "1 lesson", "3 lessons"."""
    return f"{count} lesson" if count == 1 else f"{count} lessons"


def _cell(text: str) -> str:
    """``text`` fit for one Markdown table cell: one line, no column break, an excerpt."""
    # Lesson text is anyone's: no mention, link or image in the bot's PR description either.
    flat = markdown_text(" ".join(text.split())).replace("|", "\\|")
    return flat if len(flat) <= EXCERPT else flat[: EXCERPT - 1] + "…"


def _more(total: int) -> list[str]:
    return ["", f"... and {total - MAX_ROWS} more."] if total > MAX_ROWS else []


def _files_section(path: str, plan: SyncPlan) -> list[str]:
    """Which lessons went to which path-scoped file, and the files removed or left alone."""
    files = plan.files
    if not files.formats and not files.deletes:
        return []
    in_block = [entry.bullet_id for entry in plan.entries if f"[{entry.bullet_id}]" in plan.text]
    lines = [
        "",
        f"### Path-scoped rule files ({len(files.wanted)})",
        "",
        "Lessons anchored to paths are in the rule files of the agents this repository's "
        "settings name (`agents_md.scoped`), which an agent loads when it works on matching "
        f"files; `{path}` keeps the others ({len(in_block)}"
        + (f": {', '.join(in_block[:MAX_ROWS])}" if in_block else "")
        + ").",
    ]
    if files.areas:
        lines += ["", "| Files | Applies to | Lessons |", "|---|---|---|"]
        for area in files.areas[:MAX_ROWS]:
            paths = "<br>".join(f"`{fmt.path(area.slug)}`" for fmt in files.formats)
            globs = ", ".join(f"`{glob}`" for glob in area.globs[:20])
            more = f" and {len(area.globs) - 20} more" if len(area.globs) > 20 else ""
            ids = ", ".join(entry.bullet_id for entry in area.entries[:MAX_ROWS])
            lines.append(f"| {paths} | {globs}{more} | {ids} |")
        lines += _more(len(files.areas))
    if files.deletes:
        gone = ", ".join(f"`{deleted}`" for deleted in sorted(files.deletes)[:MAX_ROWS])
        lines += ["", f"Removed (no lesson left for them): {gone}."]
    if files.left_alone:
        mine = ", ".join(f"`{kept}`" for kept in files.left_alone[:MAX_ROWS])
        lines += [
            "",
            f"Left as they are (without playbook-bot's marker, they are not its): {mine}.",
        ]
    return lines
