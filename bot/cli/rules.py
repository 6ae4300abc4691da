"""The `import-rules` command: a team's agent rule files (AGENTS.md, ...) as its first playbook."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bot import local_files
from bot.cli import rule_folders
from bot.cli.base import Context, UserError, echo_json, github_errors, note, pass_context
from bot.cli.rule_places import repo_path
from playbook.lessons import fields, secrets
from playbook.lessons.fields import FieldProblem
from playbook.rules import imports
from playbook.rules.anchors import Anchors, of_file
from playbook.rules.imports import RuleSource
from playbook.rules.parse import (
    AGENTS,
    MAX_FILE_BYTES,
    RULE_FILES,
    ParsedRules,
    RuleFileTooLarge,
    bots_own,
    kind_of,
    parse,
)

if TYPE_CHECKING:
    from github.Repository import Repository

    from bot.config import Settings

# The rule files of a repository's root, as agents look for them; `.cursor/rules` is a folder.
ROOT_FILES = (
    "AGENTS.md",
    "CLAUDE.md",
    ".cursorrules",
    ".windsurfrules",
    ".github/copilot-instructions.md",
)
CURSOR_RULES = ".cursor/rules"
# A checkout with more rule files than this is not one team's rules; the walk stops there.
MAX_RULE_FILES = 200
# Folders no one keeps their own rules in, and that can hold millions of files.
_NOT_SEARCHED = frozenset(
    {".git", "node_modules", "vendor", ".venv", "venv", "__pycache__", "dist", "build", "target"}
)
_SHOWN_CHARS = 100
_KNOWN = ", ".join(RULE_FILES)


@dataclass(frozen=True)
class _NotRead:
    """A rule file (or folder) of a folder given that was not read, and why."""

    name: str
    reason: str
    folder: Path


# Why a folder (or file) reached through a link out of the folder given is not read.
_LINKED_OUT = "a symbolic link to a folder outside {}"


@dataclass(frozen=True)
class _Loaded:
    """A rule file read and parsed, with its provenance."""

    name: str
    parsed: ParsedRules
    learned_from: str
    source_url: str | None
    # What its lessons are about: its front matter's globs, or a nested AGENTS.md's folder.
    anchors: Anchors


@click.command(name="import-rules")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path), metavar="[PATH]...")
@click.option(
    "--repo",
    metavar="OWNER/NAME",
    help="Read the rule files of the root, .cursor/rules, .github/instructions and "
    ".claude/rules of the repository's default branch on GitHub instead.",
)
@click.option(
    "--scope",
    default=None,
    metavar="SCOPE",
    help="Scope of the new lessons (default: global; with --repo, the repository).",
)
@click.option(
    "--status",
    type=click.Choice(imports.STATUSES),
    default="proposed",
    show_default=True,
    help="proposed lessons wait for a maintainer's approval; active ones are retrieved at once.",
)
@click.option("--dry-run", is_flag=True, help="Only show what would be added; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_context
def import_rules(
    ctx: Context,
    paths: tuple[Path, ...],
    repo: str | None,
    scope: str | None,
    status: str,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Import agent rule files (AGENTS.md, CLAUDE.md, .cursorrules, ...) as lessons.

    PATH is a rule file or a folder, searched for AGENTS.md (at any depth), CLAUDE.md,
    .cursorrules, .windsurfrules, .github/copilot-instructions.md, .cursor/rules/*.mdc,
    .github/instructions/*.instructions.md and .claude/rules/*.md. Each list item or short
    paragraph becomes a lesson tagged with its headings; code, tables and HTML are skipped,
    and so are near-duplicates of lessons already in the scope or earlier in the import, so
    importing the same files again adds nothing. Lessons are anchored to the files their
    rule is about: an .mdc's globs, an applyTo, a paths list, a nested AGENTS.md's folder.
    The bot's own playbook-* rule files are never read.
    """
    if bool(paths) == bool(repo):
        raise click.UsageError("give rule files or folders, or --repo OWNER/NAME (not both)")
    max_chars = ctx.settings.max_lesson_chars
    if repo:
        full_name, loaded = _from_github(ctx.settings, repo, max_chars)
        not_read = []
        scope = _repo_scope(ctx, full_name) if scope is None else scope
    else:
        loaded, not_read = _from_disk(paths, max_chars)
        scope = "global" if scope is None else scope
    sources = [
        RuleSource(one.name, one.parsed.items, one.learned_from, one.source_url, one.anchors.paths)
        for one in loaded
    ]
    try:
        with ctx.transaction() as session:
            planned = imports.plan(
                session, sources, scope=scope, status=status, max_chars=max_chars
            )
            if dry_run:
                session.rollback()  # planning may refresh the search index's snapshot
            else:
                imports.apply(session, planned, actor=ctx.actor, max_chars=max_chars)
    except FieldProblem as problem:
        raise UserError(f"--{problem.field} {problem.why}") from None
    for one in loaded:
        for remark in (*one.parsed.notes, *one.anchors.notes):
            note(f"{one.name}: {remark}")
        if one.anchors.paths:
            note(f"{one.name}: its lessons are anchored to {', '.join(one.anchors.paths)}")
    summary = _summary(planned, loaded, not_read, dry_run=dry_run)
    # A refused item's text is scanned again before it is shown: one scanner set-up for all.
    with secrets.scanning():
        _report(planned, loaded, not_read, summary, dry_run=dry_run, as_json=as_json)
    if planned.status == "proposed" and planned.of(imports.ADD):
        would = "would wait" if dry_run else "wait"
        note(
            f"proposed lessons {would} for a maintainer to approve them on /ui/proposals "
            "(or `playbook-bot approve pb-N`)"
        )


def _report(
    planned: imports.Plan,
    loaded: Sequence[_Loaded],
    not_read: Sequence[_NotRead],
    summary: str,
    *,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Print the report: a line per item, skipped piece and file not read, then the summary;
    or all of it as JSON."""
    if as_json:
        report = _as_json(planned, loaded, summary, dry_run=dry_run)
        report["not_read"] = [{"file": skip.name, "reason": skip.reason} for skip in not_read]
        echo_json(report)
        return
    for skip in not_read:
        click.echo(f"{skip.name}: not read, {skip.reason}")
    for line in _lines(planned, loaded, dry_run=dry_run):
        click.echo(line)
    click.echo(summary)


def _repo_scope(ctx: Context, repo: str) -> str:
    """The scope a repository's rule files go to: its settings file's `scope`, else owner/name."""
    from bot import repo_settings
    from bot.services import Services

    services = Services(engine=ctx.engine, settings=ctx.settings)
    with github_errors(ctx.settings, repo=repo):
        installation = repo_settings.installation_for(services, repo)
        return repo_settings.effective(services, repo, installation).scope


# --- local files ----------------------------------------------------------------------------


def _from_disk(paths: Sequence[Path], max_chars: int) -> tuple[list[_Loaded], list[_NotRead]]:
    """Every rule file the paths name or hold, read and parsed; UserError before any write.

    Nothing outside the folders given is read: a rule file in a folder that is a symbolic
    link out of it, a loop of links, a FIFO or a device is not read but named, with why
    (`bot.local_files`). A file named directly must be inside its own folder.
    """
    found: dict[Path, tuple[Path, str, Path, str]] = {}
    not_read: list[_NotRead] = []
    for given in paths:
        if not given.exists() and not given.is_symlink():
            raise UserError(f"{given} does not exist")
        if given.is_dir():
            root = given.resolve()
            inside = _rule_files(given, root, not_read)
            if not inside and not any(skip.folder == given for skip in not_read):
                raise UserError(f"{given} holds no rule files ({_KNOWN})")
            for path in inside:
                relative = path.relative_to(given).as_posix()
                found.setdefault(_key(path), (path, relative, root, given.as_posix()))
        elif kind_of(given) is None:
            raise UserError(f"{given} is not a rule file ({_KNOWN})")
        elif bots_own(given):
            raise UserError(f"{given} is the bot's own rule file: its lessons are the playbook's")
        else:
            root = given.absolute().parent.resolve()
            found.setdefault(_key(given), (given, _relative(given), root, ""))
    loaded: list[_Loaded] = []
    for path, relative, root, shown_root in found.values():
        try:
            loaded.append(_read_local(path, relative, max_chars, root, shown_root))
        except local_files.Refused as refused:
            if not shown_root:  # named on the command line: that file or nothing
                raise UserError(f"cannot read {path.as_posix()}: {refused.reason}") from None
            not_read.append(_NotRead(path.as_posix(), refused.reason, Path(shown_root)))
    return loaded, not_read


def _key(path: Path) -> Path:
    """The file a path stands for, so a link to a file given too is read once."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a loop: read (and refused) once, by its own name
        return path.absolute()


def _rule_files(folder: Path, root: Path, not_read: list[_NotRead]) -> list[Path]:
    """The rule files of a checkout: its root's, its `.cursor/rules`, and nested AGENTS.md.

    Links among them are returned for `_read_local` to check; a folder that is a link out
    of ``root`` is not searched, and is named in ``not_read``.
    """
    found: list[Path] = []
    for name in ROOT_FILES:
        if os.path.lexists(folder / name) and not _real_folder(folder / name):
            found.append(folder / name)
    rules = folder / CURSOR_RULES
    if folder.resolve().parts[-2:] == tuple(CURSOR_RULES.split("/")):
        rules = folder  # `import-rules .cursor/rules`
    if rules.is_dir() and not local_files.inside(rules, root):
        shown = rules.relative_to(folder).as_posix() if rules != folder else rules.as_posix()
        not_read.append(_NotRead(shown, _LINKED_OUT.format(folder.as_posix()), folder))
    elif rules.is_dir():
        for path in sorted(rules.iterdir()):
            if path.suffix.lower() == ".mdc" and not _real_folder(path) and not bots_own(path):
                found.append(path)
                if len(found) >= MAX_RULE_FILES:
                    return found
    scoped, linked_out = rule_folders.local(folder, root, MAX_RULE_FILES - len(found))
    found += scoped
    for shown in linked_out:
        where = shown or folder.as_posix()
        not_read.append(_NotRead(where, _LINKED_OUT.format(folder.as_posix()), folder))
    for top, folders, files in os.walk(folder):
        # Hidden folders hold tools' state, not a team's rules; symbolic links are not followed.
        here = Path(top)
        folders[:] = sorted(f for f in folders if f not in _NOT_SEARCHED and f[:1] != ".")
        for name in folders:
            if (here / name).is_symlink() and not local_files.inside(here / name, root):
                # Never walked (os.walk follows no links); named, since it may hold rules.
                shown = (here / name).relative_to(folder).as_posix()
                not_read.append(_NotRead(shown, _LINKED_OUT.format(folder.as_posix()), folder))
        if here == folder:
            continue  # the root's AGENTS.md is among ROOT_FILES
        for name in sorted(files):
            if kind_of(name) == AGENTS and len(found) < MAX_RULE_FILES:
                found.append(here / name)
    return found[:MAX_RULE_FILES]


def _real_folder(path: Path) -> bool:
    """Whether ``path`` is a folder itself (not a link to one: that is read, and refused)."""
    return path.is_dir() and not path.is_symlink()


def _relative(path: Path) -> str:
    """A file's path for its provenance: as given when relative, else from here if inside."""
    if not path.is_absolute():
        return path.as_posix()
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.name


def _read_local(path: Path, relative: str, max_chars: int, root: Path, shown_root: str) -> _Loaded:
    """A rule file read (inside ``root`` only) and parsed; Refused when it is not read."""
    name = path.as_posix()
    data, status = local_files.read_inside(
        path, root, MAX_FILE_BYTES, shown_root=shown_root or "its folder"
    )
    if max(status.st_size, len(data)) > MAX_FILE_BYTES:
        raise UserError(f"{name} has {RuleFileTooLarge.about(max(status.st_size, len(data)))}")
    changed = datetime.fromtimestamp(status.st_mtime, UTC)
    try:
        parsed = parse(data, kind_of(path), max_chars=max_chars)
    except RuleFileTooLarge as error:
        raise UserError(f"{name} has {error}") from None
    url = name if len(name) <= fields.SOURCE_URL_CHARS else None
    where = repo_path(path, Path(shown_root) if shown_root else None)
    return _Loaded(
        name,
        parsed,
        _provenance(relative, f"@{changed:%Y-%m-%d}"),
        url,
        of_file(where, parsed.scoping),
    )


def _provenance(what: str, suffix: str) -> str:
    """``what`` + ``suffix`` in the 200 characters learned_from holds, cut from the left."""
    room = fields.TICKET_KEY_CHARS - len(suffix)
    if len(what) > room:
        what = "…" + what[-(room - 1) :]
    return what + suffix


# --- GitHub ---------------------------------------------------------------------------------


def _from_github(settings: Settings, repo: str, max_chars: int) -> tuple[str, list[_Loaded]]:
    """The rule files of ``repo``'s default branch, read through the contents API."""
    from bot.github import GitHubClients, NotConfigured

    if repo.count("/") != 1 or not all(repo.split("/")):
        raise UserError(f"--repo must look like owner/name, not {repo!r}")
    clients = GitHubClients(settings)
    missing = clients.missing()
    if missing is not None:
        raise UserError(f"--repo reads GitHub: set {missing}")
    owner, name = repo.split("/")
    try:
        with github_errors(settings, repo=repo):
            installation = None
            if settings.github_app_id:
                installation = clients.integration().get_repo_installation(owner, name).id
            repository = clients.for_installation(installation).get_repo(repo)
            branch = repository.default_branch
            sha = repository.get_branch(branch).commit.sha
            files = list(_repo_files(repository, branch))
    except NotConfigured as error:
        raise UserError(str(error)) from None
    if not files:
        raise UserError(f"{repo} has no rule files on {branch} ({_KNOWN})")
    full_name = repository.full_name or repo
    web = f"{settings.github_web_url}/{full_name}/blob/{sha}"
    loaded = []
    for path, data in files:
        try:
            parsed = parse(data, kind_of(path), max_chars=max_chars)
        except RuleFileTooLarge as error:
            raise UserError(f"{full_name}:{path} has {error}") from None
        learned_from = _provenance(f"{full_name}:{path}", f"@{sha[:7]}")
        url = f"{web}/{path}"
        loaded.append(
            _Loaded(
                path,
                parsed,
                learned_from,
                url if len(url) <= fields.SOURCE_URL_CHARS else None,
                of_file(path, parsed.scoping),
            )
        )
    return full_name, loaded


def _repo_files(repository: Repository, ref: str) -> Iterator[tuple[str, bytes]]:
    """(path, bytes) of each rule file the branch has; a missing one is skipped."""
    for path in ROOT_FILES:
        data = _file(repository, path, ref)
        if data is not None:
            yield path, data
    listing = _contents(repository, CURSOR_RULES, ref)
    if isinstance(listing, list):
        mdc = sorted(
            entry.path
            for entry in listing
            if entry.type == "file"
            and entry.name.lower().endswith(".mdc")
            and not bots_own(entry.name)
        )
        for path in mdc[:MAX_RULE_FILES]:
            data = _file(repository, path, ref)
            if data is not None:
                yield path, data
    for path in rule_folders.on_github(repository, ref, MAX_RULE_FILES):
        data = _file(repository, path, ref)
        if data is not None:
            yield path, data


def _contents(repository: Repository, path: str, ref: str) -> Any:
    """What the contents API has at ``path``: a file, a folder's listing, or None (404)."""
    from github.GithubException import UnknownObjectException

    try:
        return repository.get_contents(path, ref=ref)
    except UnknownObjectException:
        return None


def _file(repository: Repository, path: str, ref: str) -> bytes | None:
    """A file's bytes, None when absent or a folder; UserError when over MAX_FILE_BYTES."""
    found = _contents(repository, path, ref)
    if found is None or isinstance(found, list) or found.type != "file":
        return None
    if found.size > MAX_FILE_BYTES or found.encoding != "base64":
        # The contents API sends no content for files over a megabyte.
        raise UserError(f"{repository.full_name}:{path} has {RuleFileTooLarge.about(found.size)}")
    return found.decoded_content


# --- the report -----------------------------------------------------------------------------


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _shown(text: str) -> str:
    return fields.shorten(text, _SHOWN_CHARS)[0]


def _refused_text(entry: imports.Entry) -> str:
    """A refused item's text as shown, unless it holds a credential: that is never repeated,
    however it is written (looked for in the visible text, `secrets.mask`, as at every exit)."""
    found = secrets.mask(entry.item.text)
    return f"(not shown: it holds {found.findings[0].label})" if found.findings else found.text


def _summary(
    planned: imports.Plan,
    loaded: Sequence[_Loaded],
    not_read: Sequence[_NotRead] = (),
    *,
    dry_run: bool,
) -> str:
    """One line: added (or would add), from how many files, skipped, near-duplicates."""
    added = len(planned.of(imports.ADD))
    skipped = sum(len(one.parsed.skipped) for one in loaded) + len(planned.of(imports.INVALID))
    near = len(planned.of(imports.DUPLICATE, imports.REPEAT, imports.RETIRED))
    verb = "would add" if dry_run else "added"
    line = (
        f"{verb} {_plural(added, 'lesson')} ({planned.status}) from "
        f"{_plural(len(loaded), 'file')}; skipped {skipped}; {_plural(near, 'near-duplicate')}"
    )
    if not_read:
        line += f"; {len(not_read)} not read (links out of the folder, FIFOs, devices)"
    return f"{line} (dry run: nothing was written)" if dry_run else line


def _entry_line(entry: imports.Entry, *, dry_run: bool) -> str:
    text = _shown(entry.item.text)
    tags = f" [{', '.join(entry.item.tags)}]" if entry.item.tags else ""
    if entry.outcome == imports.ADD:
        verb = "would add" if dry_run else f"added {entry.bullet_id}"
        return f"{entry.where}: {verb}{tags}: {text}"
    if entry.outcome == imports.INVALID:
        return f"{entry.where}: skipped, {entry.problem}: {_shown(_refused_text(entry))}"
    if entry.outcome == imports.RETIRED:
        why = "the same text, deprecated or archived"
    else:
        why = f"{entry.overlap:.0%} of words"
    return f"{entry.where}: near-duplicate of {entry.duplicate_of} ({why}): {text}"


def _lines(planned: imports.Plan, loaded: Sequence[_Loaded], *, dry_run: bool) -> list[str]:
    """Every item and skipped piece, file by file, in the order of their lines."""
    lines: list[str] = []
    for one in loaded:
        rows: list[tuple[int, str]] = [
            (skip.line, f"{one.name}:{skip.line}: skipped, {skip.reason}: {skip.excerpt}")
            for skip in one.parsed.skipped
        ]
        rows += [
            (entry.item.line, _entry_line(entry, dry_run=dry_run))
            for entry in planned.entries
            if entry.source.name == one.name
        ]
        lines += [row for _, row in sorted(rows, key=lambda row: row[0])]
    return lines


def _as_json(
    planned: imports.Plan, loaded: Sequence[_Loaded], summary: str, *, dry_run: bool
) -> dict[str, Any]:
    """The report as data: files, lessons added, pieces skipped, near-duplicates."""
    skipped = [
        {"file": one.name, "line": skip.line, "reason": skip.reason, "excerpt": skip.excerpt}
        for one in loaded
        for skip in one.parsed.skipped
    ]
    skipped += [
        {
            "file": e.source.name,
            "line": e.item.line,
            "reason": e.problem,
            "excerpt": _refused_text(e),
        }
        for e in planned.of(imports.INVALID)
    ]
    return {
        "dry_run": dry_run,
        "scope": planned.scope,
        "status": planned.status,
        "files": [
            {
                "name": one.name,
                "kind": one.parsed.kind,
                "learned_from": one.learned_from,
                "source_url": one.source_url,
                "notes": [*one.parsed.notes, *one.anchors.notes],
                "paths": list(one.anchors.paths) if one.anchors.paths else None,
            }
            for one in loaded
        ],
        "added": [
            {
                "file": e.source.name,
                "line": e.item.line,
                "id": e.bullet_id,
                "text": e.item.text,
                "tags": list(e.item.tags),
            }
            for e in planned.of(imports.ADD)
        ],
        "skipped": skipped,
        "near_duplicates": [
            {
                "file": e.source.name,
                "line": e.item.line,
                "text": e.item.text,
                "duplicate_of": e.duplicate_of,
                "of": {"duplicate": "lesson", "repeat": "item", "retired": "retired"}[e.outcome],
                "overlap": round(e.overlap, 3),
            }
            for e in planned.of(imports.DUPLICATE, imports.REPEAT, imports.RETIRED)
        ],
        "summary": summary,
    }
