"""The `import-rules` command: a team's agent rule files (AGENTS.md, ...) as its first playbook."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from bot.cli.base import Context, UserError, echo_json, github_errors, note, pass_context
from playbook.lessons import fields, secrets
from playbook.lessons.fields import FieldProblem
from playbook.rules import imports
from playbook.rules.imports import RuleSource
from playbook.rules.parse import (
    AGENTS,
    MAX_FILE_BYTES,
    RULE_FILES,
    ParsedRules,
    RuleFileTooLarge,
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
class _Loaded:
    """A rule file read and parsed, with its provenance."""

    name: str
    parsed: ParsedRules
    learned_from: str
    source_url: str | None


@click.command(name="import-rules")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path), metavar="[PATH]...")
@click.option(
    "--repo",
    metavar="OWNER/NAME",
    help="Read the rule files of the root and .cursor/rules of the repository's default "
    "branch on GitHub instead.",
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
    .cursorrules, .windsurfrules, .github/copilot-instructions.md and .cursor/rules/*.mdc.
    Each list item or short paragraph becomes a lesson tagged with its headings; code,
    tables and HTML are skipped, and so are near-duplicates of lessons already in the scope
    or earlier in the import, so importing the same files again adds nothing.
    """
    if bool(paths) == bool(repo):
        raise click.UsageError("give rule files or folders, or --repo OWNER/NAME (not both)")
    max_chars = ctx.settings.max_lesson_chars
    if repo:
        full_name, loaded = _from_github(ctx.settings, repo, max_chars)
        scope = _repo_scope(ctx, full_name) if scope is None else scope
    else:
        loaded = _from_disk(paths, max_chars)
        scope = "global" if scope is None else scope
    sources = [
        RuleSource(one.name, one.parsed.items, one.learned_from, one.source_url) for one in loaded
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
        for remark in one.parsed.notes:
            note(f"{one.name}: {remark}")
    summary = _summary(planned, loaded, dry_run=dry_run)
    if as_json:
        echo_json(_as_json(planned, loaded, summary, dry_run=dry_run))
    else:
        for line in _lines(planned, loaded, dry_run=dry_run):
            click.echo(line)
        click.echo(summary)
    if planned.status == "proposed" and planned.of(imports.ADD):
        would = "would wait" if dry_run else "wait"
        note(
            f"proposed lessons {would} for a maintainer to approve them on /ui/proposals "
            "(or `playbook-bot approve pb-N`)"
        )


def _repo_scope(ctx: Context, repo: str) -> str:
    """The scope a repository's rule files go to: its settings file's `scope`, else owner/name."""
    from bot import repo_settings
    from bot.services import Services

    services = Services(engine=ctx.engine, settings=ctx.settings)
    with github_errors(ctx.settings, repo=repo):
        installation = repo_settings.installation_for(services, repo)
        return repo_settings.effective(services, repo, installation).scope


# --- local files ----------------------------------------------------------------------------


def _from_disk(paths: Sequence[Path], max_chars: int) -> list[_Loaded]:
    """Every rule file the paths name or hold, read and parsed; UserError before any write."""
    found: dict[Path, tuple[Path, str]] = {}
    for given in paths:
        if not given.exists():
            raise UserError(f"{given} does not exist")
        if given.is_dir():
            inside = list(_rule_files(given))
            if not inside:
                raise UserError(f"{given} holds no rule files ({_KNOWN})")
            for path in inside:
                found.setdefault(path.resolve(), (path, path.relative_to(given).as_posix()))
        elif kind_of(given) is None:
            raise UserError(f"{given} is not a rule file ({_KNOWN})")
        else:
            found.setdefault(given.resolve(), (given, _relative(given)))
    return [_read_local(path, relative, max_chars) for path, relative in found.values()]


def _rule_files(folder: Path) -> Iterator[Path]:
    """The rule files of a checkout: its root's, its `.cursor/rules`, and nested AGENTS.md."""
    count = 0
    for name in ROOT_FILES:
        if (folder / name).is_file():
            count += 1
            yield folder / name
    rules = folder / CURSOR_RULES
    if folder.resolve().parts[-2:] == tuple(CURSOR_RULES.split("/")):
        rules = folder  # `import-rules .cursor/rules`
    if rules.is_dir():
        for path in sorted(rules.iterdir()):
            if path.suffix.lower() == ".mdc" and path.is_file() and count < MAX_RULE_FILES:
                count += 1
                yield path
    for root, folders, files in os.walk(folder):
        # Hidden folders hold tools' state, not a team's rules; symbolic links are not followed.
        folders[:] = sorted(f for f in folders if f not in _NOT_SEARCHED and f[:1] != ".")
        if Path(root) == folder:
            continue  # the root's AGENTS.md is among ROOT_FILES
        for name in sorted(files):
            if kind_of(name) == AGENTS and count < MAX_RULE_FILES:
                count += 1
                yield Path(root) / name


def _relative(path: Path) -> str:
    """A file's path for its provenance: as given when relative, else from here if inside."""
    if not path.is_absolute():
        return path.as_posix()
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.name


def _read_local(path: Path, relative: str, max_chars: int) -> _Loaded:
    name = path.as_posix()
    try:
        status = path.stat()
        if status.st_size > MAX_FILE_BYTES:
            raise UserError(f"{name} has {RuleFileTooLarge.about(status.st_size)}")
        with path.open("rb") as stream:
            data = stream.read(MAX_FILE_BYTES + 1)  # bounded, should it grow meanwhile
        changed = datetime.fromtimestamp(status.st_mtime, UTC)
    except OSError as error:
        raise UserError(f"cannot read {name} ({error.strerror})") from None
    try:
        parsed = parse(data, kind_of(path), max_chars=max_chars)
    except RuleFileTooLarge as error:
        raise UserError(f"{name} has {error}") from None
    url = name if len(name) <= fields.SOURCE_URL_CHARS else None
    return _Loaded(name, parsed, _provenance(relative, f"@{changed:%Y-%m-%d}"), url)


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
                path, parsed, learned_from, url if len(url) <= fields.SOURCE_URL_CHARS else None
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
            if entry.type == "file" and entry.name.lower().endswith(".mdc")
        )
        for path in mdc[:MAX_RULE_FILES]:
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


def _summary(planned: imports.Plan, loaded: Sequence[_Loaded], *, dry_run: bool) -> str:
    """One line: added (or would add), from how many files, skipped, near-duplicates."""
    added = len(planned.of(imports.ADD))
    skipped = sum(len(one.parsed.skipped) for one in loaded) + len(planned.of(imports.INVALID))
    near = len(planned.of(imports.DUPLICATE, imports.REPEAT, imports.RETIRED))
    verb = "would add" if dry_run else "added"
    line = (
        f"{verb} {_plural(added, 'lesson')} ({planned.status}) from "
        f"{_plural(len(loaded), 'file')}; skipped {skipped}; {_plural(near, 'near-duplicate')}"
    )
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
                "notes": list(one.parsed.notes),
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
