"""The AGENTS.md sync: a repository's managed block of lessons, and the path-scoped rule files
of the agents its settings name, proposed through one pull request.

Every call to GitHub goes through PyGithub with the installation's client, and every step can
be repeated: a run killed between any two calls is finished by the next one, which finds the
branch, the commit and the pull request the killed run left instead of making them again.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import logging
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import requests
from github.GithubException import GithubException, UnknownObjectException
from sqlalchemy import Engine

from bot import agents_md_files as files_
from bot import repo_settings
from bot.agents_md_describe import SyncPlan as _Plan
from bot.agents_md_describe import describe, files_in, lessons_count
from bot.config import Settings
from bot.effects import TicketRef
from bot.github import GitHubClients, NotConfigured
from playbook import clock, db
from playbook.repos import syncs
from playbook.repos.settings import FILE_PATH
from playbook.repos.syncs import BRANCH
from playbook.rules import block, scoped
from playbook.scopes import GLOBAL, View

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)

ACTIONS = ("created", "updated", "unchanged", "paused", "disabled", "dry_run")


@dataclass
class SyncReport:
    """What one sync did (or, in a dry run, would do), in one line and in detail."""

    repo: str
    path: str
    action: str  # one of ACTIONS
    message: str
    pull_number: int | None = None
    pull_url: str | None = None
    block: str | None = None
    diff: str | None = None
    lessons: int = 0
    added: list[dict[str, str]] = field(default_factory=list)  # {id, text, reason}
    removed: list[dict[str, str]] = field(default_factory=list)  # {id, reason}
    paused_until: datetime | None = None
    paused_reason: str | None = None
    commit: str | None = None
    files: list[str] = field(default_factory=list)  # the path-scoped rule files kept


def clients_of(services: Services) -> GitHubClients:
    """The GitHub clients the services already hold (their tokens are reused), or new ones."""
    github = getattr(services.out, "github", None)
    return github if isinstance(github, GitHubClients) else GitHubClients(services.settings)


def is_bot_account(
    services: Services, installation_id: int | None, login: str | None, kind: str | None
) -> bool:
    """Whether ``login`` is the bot itself; when GitHub cannot say who that is, any Bot account."""
    if not login:
        return False
    try:
        return login == clients_of(services).bot_login(installation_id)
    except (NotConfigured, GithubException, requests.RequestException) as error:
        log.info("cannot tell the bot's login (%s); any Bot account counts", type(error).__name__)
    return kind == "Bot"


def is_sync_pull(
    services: Services,
    installation_id: int | None,
    head_ref: str | None,
    login: str | None,
    kind: str | None,
) -> bool:
    """Whether a PR (by its head branch and author) is the bot's own AGENTS.md sync PR."""
    return head_ref == BRANCH and is_bot_account(services, installation_id, login, kind)


def may_pause(services: Services, ref: TicketRef, login: str) -> bool:
    """Whether ``login`` closing (or reopening) the sync PR ``ref`` pauses (or resumes) the sync.

    Only write access or more counts, as GitHub answers for the verified login (the rule the
    /playbook commands use): triage is enough to close a PR, and would otherwise be enough
    to keep every lesson out of the repository's AGENTS.md.
    """
    return services.out.can_change_playbook(ref, login)


def sync(
    services: Services,
    repo: str,
    *,
    installation_id: int | None,
    dry_run: bool = False,
    ignore_pause: bool = False,
) -> SyncReport:
    """Bring ``repo``'s managed block up to date through its one sync PR (see the module).

    A dry run reads everything and writes nothing (neither to GitHub nor to the sync's
    state): the report holds the block and the diff of the file. Raises BlockProblem when
    the file's markers are malformed, NotConfigured without credentials, and GitHub's and
    the network's errors as they come.
    """
    missing = clients_of(services).missing_for(installation_id)
    if missing is not None:
        # Without GitHub the settings would read as the defaults: "not enabled" would mislead.
        raise NotConfigured(missing)
    own = repo_settings.effective(services, repo, installation_id, store=not dry_run)
    conf = own.settings.agents_md
    path = conf.path
    if not conf.enabled:
        return SyncReport(
            repo,
            path,
            "disabled",
            f"{repo}: agents_md is not enabled; `agents_md: {{enabled: true}}` in {FILE_PATH} "
            "turns the sync on",
        )
    engine = services.engine
    with db.transaction(engine) as session:
        pause = None if ignore_pause else syncs.paused(session, repo)
        expired = syncs.expired(session, repo)
        state = syncs.get(session, repo)
    recorded = state.files if state is not None else {}
    if pause is not None:
        return _paused(repo, path, pause)
    if expired and not dry_run:
        with db.transaction(engine) as session:
            syncs.resume(session, repo, "the pause is over")
        state = None

    gh = clients_of(services).for_installation(installation_id).get_repo(repo)
    default = gh.default_branch
    base = gh.get_branch(default).commit.sha
    try:
        plan = _plan(services, gh, own.scope, conf, base, recorded)
    except block.BlockProblem as problem:
        message = f"{repo}: {problem}"
        if not dry_run:
            with db.transaction(engine) as session:
                syncs.note(session, repo, path, f"failed: {problem}")
        raise block.BlockProblem(message) from None
    owner = repo.split("/", 1)[0]
    pull = _open_pull(gh, owner)
    if pull is None and state is not None and state.pull_number and not ignore_pause:
        # The close may have happened while no webhook reached us: GitHub is the truth.
        missed = _closed_by_person(services, gh, repo, installation_id, state.pull_number)
        if missed is not None:
            return _pause_missed(services, repo, conf, state, missed, dry_run)

    if pull is not None and state is not None and state.lesson_ids:
        plan = _since(services, plan, list(state.lesson_ids), own.scope)
    title, body = describe(repo, path, plan, conf.max_chars, conf.pause_days, own.scope)
    report = _report(repo, path, plan)
    branch_sha = _branch_sha(gh)
    on_branch = _read(gh, path, branch_sha) if branch_sha else None
    # The branch holds the plan: the block file, and every path-scoped file as planned.
    holds = (
        branch_sha is not None
        and on_branch == plan.desired
        and files_.branch_holds(gh, plan.files, branch_sha)
    )
    lessons = lessons_count(len(plan.entries))
    if plan.existing == plan.desired and not plan.files.changes:
        # The default branch holds the block already (merged, or copied by hand): no PR needed.
        if dry_run:
            return _dry(report, f"{path} on {default} already holds this block; nothing to change")
        report.action = "unchanged"
        report.message = (
            f"{repo}: {path} on {default} already holds the {lessons}; nothing committed"
        )
        if pull is not None:
            pull.edit(state="closed")  # its change is in already; the bot closing it pauses nothing
            report.message += f"; closed PR #{pull.number}, which had nothing left to add"
        _record(engine, report, plan, state_pull=False)
        return report
    if pull is not None and holds:
        if dry_run:
            return _dry(report, f"PR #{pull.number} already holds this block; nothing to commit")
        if (pull.title, pull.body or "") != (title, body):
            pull.edit(title=title, body=body)  # a run killed after its commit left these behind
        report.action, report.pull_number, report.pull_url = "unchanged", pull.number, pull.html_url
        report.message = (
            f"{repo}: PR #{pull.number} already holds the {lessons} for {path}; "
            f"nothing committed: {pull.html_url}"
        )
        _record(engine, report, plan, state_pull=True)
        return report
    counts = f"(+{len(plan.change.added)}, -{len(plan.change.removed)})"
    if dry_run:
        what = f"update PR #{pull.number}" if pull is not None else "open a PR"
        return _dry(report, f"would {what} from {BRANCH}: {lessons} {counts}")

    # A killed run may have left its commit on the branch already: one commit, not two.
    reusable = (
        pull is None
        and branch_sha is not None
        and holds
        and [p.sha for p in gh.get_git_commit(branch_sha).parents] == [base]
    )
    if not reusable:
        message = f"playbook-bot: the lessons for agents in {files_in(path, plan)} {counts}"
        report.commit = files_.commit(gh, base, message, path, plan.desired, plan.files)
        _point_branch(gh, report.commit, exists=branch_sha is not None)
    if pull is None:
        pull, created = _create_pull(gh, owner, default, title, body), True
    else:
        pull.edit(title=title, body=body)
        created = False
    report.pull_number, report.pull_url = pull.number, pull.html_url
    report.action = "created" if created else "updated"
    verb = "opened" if created else "updated"
    where = files_in(path, plan)
    report.message = (
        f"{repo}: {verb} PR #{pull.number} with {lessons} in {where} {counts}: {pull.html_url}"
    )
    _record(engine, report, plan, state_pull=True)
    return report


def sync_all(engine: Engine, settings: Settings) -> dict[str, int]:
    """Sync every repository the bot knows whose settings enable it; a failure skips one repo."""
    from bot.services import Services

    services = Services(engine=engine, settings=settings)
    if clients_of(services).missing() is not None:
        log.info("agents-md sync skipped: GitHub is not configured")
        return {}
    repos = dict(repo_settings.known_repos(engine))
    with db.transaction(engine) as session:
        for state in syncs.every(session):
            repos.setdefault(state.repo, None)
    counts: dict[str, int] = {}
    for repo, installation_id in sorted(repos.items()):
        try:
            report = sync(services, repo, installation_id=installation_id)
        except Exception as error:  # one repository's trouble must not stop the others
            counts["failed"] = counts.get("failed", 0) + 1
            log.warning("agents-md sync of %s failed: %s", repo, _one_line(error))
            continue
        counts[report.action] = counts.get(report.action, 0) + 1
        if report.action != "disabled":
            log.info("agents-md sync: %s", report.message)
    return counts


def _one_line(error: BaseException) -> str:
    if isinstance(error, GithubException):
        said = error.data.get("message") if isinstance(error.data, dict) else None
        return f"GitHub answered {error.status}" + (f": {said}" if said else "")
    return " ".join(f"{type(error).__name__}: {error}".split())[:300]


def _plan(
    services: Services, gh: Any, scope: str, conf: Any, base: str, recorded: dict[str, str]
) -> _Plan:
    """The block and the path-scoped files wanted, against the default branch at ``base``."""
    path = conf.path
    existing = _read(gh, path, base)
    formats = files_.formats_of(conf.scoped)
    dirs = files_.directories(formats, recorded)
    # Only with formats asked for, or files written before, is any rules directory read.
    found = files_.find(gh, dirs, base) if dirs else files_.Found()
    scopes = list(dict.fromkeys([scope, GLOBAL]))
    with db.transaction(services.engine) as session:
        entries = block.choose(session, scopes, conf.max_chars, scope=scope)
        in_block, areas = list(entries), []
        if formats:
            anchors = scoped.anchors_of(session, [entry.bullet_id for entry in entries])
            in_block, areas = scoped.split(entries, anchors, taken=found.taken(formats))
        files = files_.plan(found, formats, areas, recorded, scope=scope, dirs=dirs)
        text = block.render(in_block, scope=scope)
        desired = block.splice(existing, text, path)
        change = block.compare([*block.ids_in(existing), *files.old_ids], entries)
        removed = syncs.why_removed(session, change.removed, View(scope))
    return _Plan(entries, text, desired, existing, change, removed, files=files)


def _since(services: Services, plan: _Plan, previous: list[str], scope: str) -> _Plan:
    """``plan`` with what changed against the PR's previous version, and why lessons left it."""
    since = block.compare(previous, plan.entries)
    with db.transaction(services.engine) as session:
        removed = plan.removed | syncs.why_removed(session, since.removed, View(scope))
    return replace(plan, since=since, removed=removed)


def _read(gh: Any, path: str, ref: str) -> bytes | None:
    """The file's bytes at ``ref``, or None when there is no such file."""
    try:
        found = gh.get_contents(path, ref=ref)
    except UnknownObjectException:
        return None
    if isinstance(found, list):
        raise block.BlockProblem(f"{path} is a directory; set agents_md.path to a file")
    if found.encoding != "base64":
        # Files over 1 MB come without their content; the blob API still has it.
        return base64.b64decode(gh.get_git_blob(found.sha).content)
    return found.decoded_content


def _branch_sha(gh: Any) -> str | None:
    try:
        return gh.get_git_ref(f"heads/{BRANCH}").object.sha
    except UnknownObjectException:
        return None


def _open_pull(gh: Any, owner: str) -> Any | None:
    """The open sync PR, as GitHub lists it (the state kept here may be behind)."""
    for pull in gh.get_pulls(state="open", head=f"{owner}:{BRANCH}"):
        if pull.head.ref == BRANCH:
            return pull
    return None


def _closed_by_person(
    services: Services, gh: Any, repo: str, installation_id: int | None, number: int
) -> tuple[Any, str] | None:
    """(the PR, who closed it) when the recorded sync PR was closed unmerged by a person who
    may pause the sync (see `may_pause`); a close by anyone else pauses nothing."""
    try:
        pull = gh.get_pull(number)
    except UnknownObjectException:
        return None
    if pull.state != "closed" or pull.merged:
        return None
    closer = gh.get_issue(number).closed_by
    if closer is None or is_bot_account(services, installation_id, closer.login, closer.type):
        return None
    if not may_pause(services, TicketRef.github(repo, number, installation_id), closer.login):
        log.info("%s#%s was closed by @%s, who may not pause the sync", repo, number, closer.login)
        return None
    return pull, closer.login


def _pause_missed(
    services: Services,
    repo: str,
    conf: Any,
    state: syncs.SyncState,
    missed: tuple[Any, str],
    dry_run: bool,
) -> SyncReport:
    pull, login = missed
    pause = syncs.Pause(
        clock.now() + timedelta(days=conf.pause_days), f"closed unmerged by @{login}"
    )
    if not dry_run:
        with db.transaction(services.engine) as session:
            syncs.pause(
                session,
                repo,
                conf.path,
                pause.until,
                pause.reason,
                pull_number=pull.number,
                pull_url=pull.html_url,
            )
    return _paused(repo, conf.path, pause)


def _point_branch(gh: Any, sha: str, *, exists: bool) -> None:
    """The sync branch at ``sha``: created, or moved there (it never holds anyone's work)."""
    if not exists:
        try:
            gh.create_git_ref(f"refs/heads/{BRANCH}", sha)
            return
        except GithubException as error:
            if error.status != 422:  # 422: it exists after all (a run we did not see)
                raise
    ref = gh.get_git_ref(f"heads/{BRANCH}")
    if ref.object.sha != sha:
        ref.edit(sha, force=True)


def _create_pull(gh: Any, owner: str, base: str, title: str, body: str) -> Any:
    """Open the sync PR; if one exists already (a create whose answer was lost), edit it."""
    try:
        return gh.create_pull(base=base, head=BRANCH, title=title, body=body)
    except GithubException as error:
        pull = _open_pull(gh, owner) if error.status == 422 else None
        if pull is None:
            raise
        pull.edit(title=title, body=body)
        return pull


def _report(repo: str, path: str, plan: _Plan) -> SyncReport:
    return SyncReport(
        repo,
        path,
        "unchanged",
        "",
        block=plan.text,
        diff=diff_of(path, plan.existing, plan.desired)
        + "".join(
            diff_of(changed, plan.files.existing.get(changed), data)
            for changed, data in sorted(plan.files.writes.items())
        )
        + "".join(
            diff_of(deleted, data, None) for deleted, data in sorted(plan.files.deletes.items())
        ),
        files=sorted(plan.files.wanted),
        lessons=len(plan.entries),
        added=[{"id": e.bullet_id, "text": e.text, "reason": e.reason} for e in plan.change.added],
        removed=[{"id": i, "reason": plan.removed.get(i, "")} for i in plan.change.removed],
    )


def _dry(report: SyncReport, what: str) -> SyncReport:
    report.action = "dry_run"
    report.message = f"{report.repo}: dry run: {what}; nothing written"
    return report


def diff_of(path: str, existing: bytes | None, desired: bytes | None) -> str:
    """A unified diff of the file from the default branch's to the synced one (None: none)."""
    old = [] if existing is None else _text(existing).splitlines(keepends=True)
    new = [] if desired is None else _text(desired).splitlines(keepends=True)
    before = "/dev/null" if existing is None else f"a/{path}"
    after = "/dev/null" if desired is None else f"b/{path}"
    lines = difflib.unified_diff(old, new, before, after)
    # As git prints it: a last line without a line break is said so, not run into the next.
    return "".join(
        line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n" for line in lines
    )


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _paused(repo: str, path: str, pause: syncs.Pause) -> SyncReport:
    return SyncReport(
        repo,
        path,
        "paused",
        f"{repo}: sync paused until {pause.until:%Y-%m-%d} ({pause.reason}); "
        f"`playbook-bot agents-md sync --repo {repo} --resume` syncs now",
        paused_until=pause.until,
        paused_reason=pause.reason,
    )


def _record(engine: Engine, report: SyncReport, plan: _Plan, *, state_pull: bool) -> None:
    digest = hashlib.sha256(plan.text.encode("utf-8")).hexdigest()
    with db.transaction(engine) as session:
        syncs.record(
            session,
            report.repo,
            path=report.path,
            result=report.message,
            pull_number=report.pull_number if state_pull else None,
            pull_url=report.pull_url if state_pull else None,
            block_sha=digest,
            lesson_ids=[entry.bullet_id for entry in plan.entries],
            files=plan.files.recorded,
        )
