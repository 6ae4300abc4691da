"""Side effects on GitHub and Jira, live or dry-run, each logged with what happened."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Protocol, TypeVar

import requests
from github.GithubException import GithubException, UnknownObjectException
from jira.exceptions import JIRAError
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from bot import claims, metrics, pull_files, reaction_reads, review_reads
from bot.config import Settings
from bot.github import GitHubClients, NotConfigured
from bot.jira import JiraAuthor, JiraClient, author_of
from bot.logs import current_delivery
from bot.reaction_reads import ReactionsRead
from bot.review_reads import FeedbackRead
from playbook import db
from playbook.anchors.stale import FileChange
from playbook.deliveries import inbox, side_effects

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class TicketRef:
    """Where a ticket lives: a GitHub issue or PR (``owner/repo#12``) or a Jira issue."""

    target: str  # github | jira
    key: str
    repo: str | None = None
    number: int | None = None
    installation_id: int | None = None

    @classmethod
    def github(cls, repo: str, number: int, installation_id: int | None) -> TicketRef:
        """A GitHub issue or pull request."""
        return cls("github", f"{repo}#{number}", repo, number, installation_id)

    @classmethod
    def jira(cls, key: str) -> TicketRef:
        """A Jira issue."""
        return cls("jira", key)


@dataclass(frozen=True)
class JiraCommentSeen:
    """A Jira comment as Jira's API reports it: the author to trust, and the text."""

    author: JiraAuthor
    body: str


class Effects(Protocol):
    """What handlers may do outside the database."""

    # True when nothing leaves the process (a demo, a try-out): side effects log as dry_run.
    dry_run: bool

    def missing(self, ref: TicketRef) -> str | None:
        """Why nothing can be posted on ``ref`` (the setting to set), or None if it can."""

    def upsert_comment(
        self, ref: TicketRef, body: str, existing_id: str | None, *, marker: str, adopt: bool
    ) -> str:
        """Edit ``existing_id``, or with ``adopt`` the bot's comment carrying ``marker`` if
        one exists, or post a new one carrying it; returns the comment id."""

    def can_change_playbook(self, ref: TicketRef, user: str | JiraAuthor) -> bool:
        """Whether ``user`` may change the playbook from this ticket."""

    def flagged_for_review(self, ref: TicketRef) -> bool:
        """Whether the ticket carries the human-review flag."""

    def jira_comment(
        self, ref: TicketRef, comment_id: str, claimed: JiraCommentSeen
    ) -> JiraCommentSeen | None:
        """The comment as Jira has it (None if Jira has no such comment)."""

    def commit_messages(self, ref: TicketRef) -> list[str]:
        """The commit messages of the pull request ``ref``."""

    def pull_feedback(self, ref: TicketRef, kind: str, limit: int) -> FeedbackRead:
        """One kind of review feedback on the pull request ``ref`` (`bot.review_reads`)."""

    def pull_work(self, ref: TicketRef, with_diff: bool) -> PullWork | None:
        """The pull request's title, body, commit messages and maybe its bounded diff."""

    def pull_files(self, ref: TicketRef) -> list[FileChange]:
        """The files the pull request ``ref`` changes (`bot.pull_files`); [] if it is gone."""

    def forget_installation(self, installation_id: int) -> None:
        """Drop what is cached for a removed installation (its client and token)."""

    def comment_reactions(self, ref: TicketRef, comment_id: str, etag: str | None) -> ReactionsRead:
        """The reactions on the bot's comment ``comment_id`` on ``ref``, asked with ``etag``."""

    def repository_private(self, ref: TicketRef) -> bool:
        """Whether ``ref``'s repository is private (or internal): only its members see it."""

    def own_login(self, ref: TicketRef) -> str | None:
        """The account the bot acts as on ``ref``, when GitHub says (None: it will not)."""


@dataclass(frozen=True)
class CommentText:
    """What a comment effect says: its text, its slot's purpose and the lessons it shows."""

    body: str
    purpose: str
    bullet_ids: list[str] | None = None


def log_effect(
    engine: Engine,
    ref: TicketRef,
    action: str,
    status: str,
    detail: str | None = None,
    *,
    comment: CommentText | None = None,
) -> None:
    """Append to the side-effect log (done, skipped with the setting to fix, or dry run)."""
    with db.transaction(engine) as session:
        if status != "done":
            # Nothing left the process: a crash that forgets this line forgets no side effect,
            # and the worker need not wait for a disk flush per delivery without credentials.
            inbox.asynchronous_commit(session)
        record_effect(session, ref, action, status, detail, comment=comment)


def read_softly(
    engine: Engine,
    dry_run: bool,
    ref: TicketRef,
    action: str,
    call: Callable[[], T],
    consequence: str,
    logger: logging.Logger = log,
) -> T | None:
    """``call()``'s answer, or None when it fails, logged either way: for a read whose failure
    must cost only what depends on it (``consequence``, said in the log), not the delivery.

    Like `context.effect`: the lease is checked first, and a missing credential is logged as
    skipped with the setting to set. ``logger``: the handler's, whose lines these follow.
    """
    claims.check()
    try:
        result = call()
    except NotConfigured as missing:
        logger.warning("%s on %s skipped: %s; %s", action, ref.key, missing, consequence)
        log_effect(engine, ref, action, "skipped", str(missing))
        return None
    except (GithubException, requests.RequestException) as error:
        why = f"HTTP {error.status}" if isinstance(error, GithubException) else type(error).__name__
        logger.warning("%s on %s failed (%s): %s", action, ref.key, why, consequence)
        log_effect(engine, ref, action, "failed", why)
        return None
    log_effect(engine, ref, action, "dry_run" if dry_run else "done")
    return result


def record_effect(
    session: Session,
    ref: TicketRef,
    action: str,
    status: str,
    detail: str | None = None,
    *,
    comment: CommentText | None = None,
) -> None:
    """Append to the side-effect log in the caller's transaction.

    With ``comment``, its text is kept too: what was posted can be read back, and what
    was skipped can be posted later (`deliveries repost`) exactly as it was written.
    """
    side_effects.record(
        session,
        delivery_guid=None if current_delivery.get() == "-" else current_delivery.get(),
        target=ref.target,
        action=action,
        ticket_key=ref.key,
        status=status,
        detail=detail,
        body=comment.body if comment is not None else None,
        purpose=comment.purpose if comment is not None else None,
        bullet_ids=comment.bullet_ids if comment is not None else None,
        installation_id=ref.installation_id,
    )
    metrics.side_effect_on_commit(session, ref.target, action, status)


class LiveEffects:
    """Talks to GitHub through PyGithub and to Jira through the `jira` client."""

    dry_run = False

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.github = GitHubClients(settings)
        self.jira = JiraClient(settings)

    def missing(self, ref: TicketRef) -> str | None:
        """The settings GitHub or Jira calls for ``ref`` would need, or None."""
        if ref.target == "jira":
            missing = self.jira.missing()
            return f"Jira is not configured: set {missing}" if missing else None
        return self.github.missing_for(ref.installation_id)

    def _issue(self, ref: TicketRef):
        client = self.github.for_installation(ref.installation_id)
        return client.get_repo(ref.repo or "").get_issue(ref.number or 0)

    def upsert_comment(
        self, ref: TicketRef, body: str, existing_id: str | None, *, marker: str, adopt: bool
    ) -> str:
        """Edit, adopt or post the bot's comment; a comment deleted by a person is posted anew."""
        if ref.target == "jira":
            return self._jira_upsert(ref, body, existing_id, marker, adopt)
        return self._github_upsert(ref, body, existing_id, marker, adopt)

    def _github_upsert(
        self, ref: TicketRef, body: str, existing_id: str | None, marker: str, adopt: bool
    ) -> str:
        hidden = f"<!-- {marker} -->"
        text = body if hidden in body else f"{body}\n{hidden}"
        issue = self._issue(ref)
        if existing_id:
            try:
                comment = issue.get_comment(int(existing_id))
                if comment.body != text:
                    comment.edit(text)
                return existing_id
            except UnknownObjectException:
                pass  # a person deleted it: post it again
        if adopt:
            # The last attempt's outcome is unknown (a timeout, a kill): the comment may be
            # there already. Only the bot's own comments count, since anyone can type a marker.
            mine = self._is_mine(ref)
            for comment in issue.get_comments():
                if hidden in (comment.body or "") and mine(comment):
                    log.info("adopted comment %s on %s", comment.id, ref.key)
                    if comment.body != text:
                        comment.edit(text)
                    return str(comment.id)
        return str(issue.create_comment(text).id)

    def _is_mine(self, ref: TicketRef) -> Callable[[Any], bool]:
        """A test for "this comment is the bot's": made by our App, or by our login."""
        app_id = self.settings.github_app_id
        try:
            login: str | None = self.github.bot_login(ref.installation_id)
        except GithubException as error:
            # A GitHub (or proxy) that will not say who we are: an App's comments are still
            # the ones its bot account made through the App.
            log.warning("cannot tell the bot's login (HTTP %s); matching by App", error.status)
            login = None

        def mine(comment: Any) -> bool:
            # Public attributes, all in the listing's JSON (GitHub sends
            # performed_via_github_app on every issue comment, null when no App made it).
            via = comment.performed_via_github_app
            if app_id and via is not None and via.id == app_id:
                return True
            user = comment.user
            if login is not None:
                return user is not None and user.login == login
            return bool(app_id) and user is not None and user.type == "Bot"

        return mine

    def _jira_upsert(
        self, ref: TicketRef, body: str, existing_id: str | None, marker: str, adopt: bool
    ) -> str:
        client = self.jira.client()
        if existing_id:
            try:
                comment = client.comment(ref.key, existing_id)
                if comment.body != body:
                    comment.update(body=body)
                return existing_id
            except JIRAError as error:
                if error.status_code != 404:
                    raise
        if adopt:
            try:
                me: JiraAuthor | None = self.jira.myself()
            except JIRAError as error:
                # A Jira that will not say who we are: the marker property alone decides.
                log.warning("cannot tell the bot's Jira account (HTTP %s)", error.status_code)
                me = None
            for comment in self.jira.comments(ref.key):
                author = author_of(comment.get("author"))
                if me is not None and not author.ids & me.ids and author.name != me.name:
                    continue
                if self.jira.marker_of(str(comment["id"])) == marker:
                    log.info("adopted comment %s on %s", comment["id"], ref.key)
                    if comment.get("body") != body:
                        client.comment(ref.key, str(comment["id"])).update(body=body)
                    return str(comment["id"])
        return self.jira.add_comment(ref.key, body, marker)

    def can_change_playbook(self, ref: TicketRef, user: str | JiraAuthor) -> bool:
        """Write access on the repo (GitHub); a listed id or a project permission (Jira)."""
        if isinstance(user, JiraAuthor):
            # Account ids (Cloud) and user keys (Data Center) only: an email or a display
            # name is something a person can set for themselves.
            if user.ids & self.settings.jira_allowed:
                return True
            permission = self.settings.jira_permission
            project = ref.key.rsplit("-", 1)[0]
            return bool(permission) and self.jira.has_permission(project, user, permission)
        client = self.github.for_installation(ref.installation_id)
        try:
            permission = client.get_repo(ref.repo or "").get_collaborator_permission(user)
        except GithubException as error:
            if error.status in (403, 404):
                return False
            raise
        return permission in ("admin", "maintain", "write")

    def flagged_for_review(self, ref: TicketRef) -> bool:
        """The review label on the issue, or the configured Jira field set."""
        label = self.settings.review_label.lower()
        if ref.target == "github":
            return any(lbl.name.lower() == label for lbl in self._issue(ref).labels)
        issue = self.jira.client().issue(ref.key)
        labels = [str(lbl).lower() for lbl in (getattr(issue.fields, "labels", None) or [])]
        if label in labels:
            return True
        field_name = self.settings.jira_review_field
        if not field_name:
            return False
        ids = [f["id"] for f in self.jira.client().fields() if f["name"] == field_name]
        return any(getattr(issue.fields, field_id, None) not in (None, "", []) for field_id in ids)

    def forget_installation(self, installation_id: int) -> None:
        """Drop the installation's client, so a removed App is never used again."""
        self.github.forget(installation_id)

    def commit_messages(self, ref: TicketRef) -> list[str]:
        """The messages of the pull request's commits, as GitHub lists them."""
        client = self.github.for_installation(ref.installation_id)
        try:
            pull = client.get_repo(ref.repo or "").get_pull(ref.number or 0)
            return [commit.commit.message for commit in pull.get_commits()]
        except GithubException as error:
            # The PR is gone: no commits to read (a retry would not help).
            if error.status == 404:
                return []
            raise

    def pull_files(self, ref: TicketRef) -> list[FileChange]:
        """The PR's changed files, at most GitHub's 3,000; [] when the PR is gone."""

        def read() -> list[FileChange]:
            client = self.github.for_installation(ref.installation_id)
            try:
                return pull_files.read_files(client, ref.repo or "", ref.number or 0)
            except GithubException as error:
                if error.status == 404:
                    return []
                raise

        # The handlers of one delivery (anchors, staleness, the PR's comment) share one read.
        return pull_files.once_per_delivery(ref.key, read)

    def pull_work(self, ref: TicketRef, with_diff: bool) -> PullWork | None:
        """A PR's title, body, commit messages and (``with_diff``) bounded diff; None if gone."""
        client = self.github.for_installation(ref.installation_id)
        try:
            pull = client.get_repo(ref.repo or "").get_pull(ref.number or 0)
            # The client is lazy: the PR itself is fetched here, so its 404 is caught too.
            title, body = pull.title or "", pull.body or ""
            commits = [c.commit.message for c in islice(pull.get_commits(), PULL_WORK_COMMITS)]
            diff = _bounded_diff(pull.get_files()) if with_diff else None
        except GithubException as error:
            if error.status == 404:  # the PR is gone: nothing to rate it by
                return None
            raise
        return PullWork(title, body, commits, diff)

    def comment_reactions(self, ref: TicketRef, comment_id: str, etag: str | None) -> ReactionsRead:
        """The comment's reactions, conditionally (`bot.reaction_reads`)."""
        client = self.github.for_installation(ref.installation_id)
        return reaction_reads.read_reactions(client, ref.repo or "", int(comment_id), etag)

    def repository_private(self, ref: TicketRef) -> bool:
        """GitHub's ``private`` flag of the repository (true for internal ones too)."""
        client = self.github.for_installation(ref.installation_id)
        return bool(client.get_repo(ref.repo or "").private)

    def own_login(self, ref: TicketRef) -> str | None:
        """``<app-slug>[bot]``, or the personal token's owner; None if GitHub will not say."""
        try:
            return self.github.bot_login(ref.installation_id)
        except GithubException as error:
            log.warning("cannot tell the bot's login (HTTP %s)", error.status)
            return None

    def pull_feedback(self, ref: TicketRef, kind: str, limit: int) -> FeedbackRead:
        """Reviews, line comments or conversation of a PR; the bot's own marked as a bot's."""
        client = self.github.for_installation(ref.installation_id)
        own = None
        if not (self.settings.github_app_id and ref.installation_id is not None):
            # A personal token's comments are a User's: only its login tells they are ours.
            try:
                own = self.github.bot_login(ref.installation_id)
            except GithubException:
                own = None
        return review_reads.read_feedback(client, ref.repo or "", ref.number or 0, kind, limit, own)

    def jira_comment(
        self, ref: TicketRef, comment_id: str, claimed: JiraCommentSeen
    ) -> JiraCommentSeen | None:
        """Read the comment back from Jira: its author and text are Jira's, not the payload's."""
        try:
            raw = self.jira.comment(ref.key, comment_id)
        except JIRAError as error:
            if error.status_code == 404:
                return None
            raise
        body = raw.get("body") if isinstance(raw.get("body"), str) else ""
        return JiraCommentSeen(author_of(raw.get("author")), body)


# A rating job reads at most this many commits and files of a PR, and this much of its diff.
PULL_WORK_COMMITS = 50
PULL_WORK_FILES = 100
PULL_WORK_DIFF_CHARS = 12_000


@dataclass(frozen=True)
class PullWork:
    """A closed PR's own words (and maybe its diff), as GitHub has them now."""

    title: str
    body: str
    commits: list[str]
    diff: str | None


def _bounded_diff(files: Any) -> str:
    """The PR's patches, file by file, cut at `PULL_WORK_DIFF_CHARS` (binary files have none)."""
    parts: list[str] = []
    used = 0
    for changed in islice(files, PULL_WORK_FILES):
        piece = f"--- {changed.filename}\n{changed.patch or '(no text diff)'}\n"
        parts.append(piece[: PULL_WORK_DIFF_CHARS - used])
        used += len(parts[-1])
        if used >= PULL_WORK_DIFF_CHARS:
            break
    return "".join(parts)


@dataclass
class DryRunEffects:
    """Prints (and keeps) what would be posted; used by `demo` and for trying the bot out.

    Offline, nothing can be checked against GitHub or Jira: comments are taken as the
    payload says, and only the users named in ``writers`` may change the playbook.
    """

    echo: bool = True
    dry_run: bool = True
    posted: list[tuple[str, str, str]] = field(default_factory=list)
    writers: set[str] = field(default_factory=set)
    flagged: set[str] = field(default_factory=set)
    markers: dict[str, str] = field(default_factory=dict)

    def missing(self, ref: TicketRef) -> str | None:
        """Nothing: a dry run can always pretend to post."""
        return None

    def upsert_comment(
        self, ref: TicketRef, body: str, existing_id: str | None, *, marker: str, adopt: bool
    ) -> str:
        """Record the comment instead of posting it."""
        if existing_id is None and adopt and marker in self.markers:
            existing_id = self.markers[marker]
        action = "edit comment" if existing_id else "comment"
        self.posted.append((action, ref.key, body))
        if self.echo:
            print(f"\n--- would {action} on {ref.key} ({ref.target}) ---\n{body}\n")
        comment_id = existing_id or f"dry-run-{len(self.posted)}"
        self.markers[marker] = comment_id
        return comment_id

    def can_change_playbook(self, ref: TicketRef, user: str | JiraAuthor) -> bool:
        """Only the users named in ``writers``."""
        names = user.ids if isinstance(user, JiraAuthor) else {user}
        return bool(names & self.writers)

    def flagged_for_review(self, ref: TicketRef) -> bool:
        """Only the tickets named in ``flagged``."""
        return ref.key in self.flagged

    def jira_comment(
        self, ref: TicketRef, comment_id: str, claimed: JiraCommentSeen
    ) -> JiraCommentSeen | None:
        """The comment as the payload claims it (a dry run has no Jira to ask)."""
        return claimed

    def commit_messages(self, ref: TicketRef) -> list[str]:
        """None: a dry run has no GitHub to ask."""
        return []

    def pull_work(self, ref: TicketRef, with_diff: bool) -> PullWork | None:
        """None: a dry run has no GitHub to ask."""
        return None

    def pull_files(self, ref: TicketRef) -> list[FileChange]:
        """None: a dry run has no GitHub to ask."""
        return []

    def pull_feedback(self, ref: TicketRef, kind: str, limit: int) -> FeedbackRead:
        """Nothing: a dry run has no GitHub to ask."""
        return FeedbackRead(None, [])

    def forget_installation(self, installation_id: int) -> None:
        """Nothing is cached in a dry run."""

    def comment_reactions(self, ref: TicketRef, comment_id: str, etag: str | None) -> ReactionsRead:
        """Unchanged: a dry run has no GitHub to ask."""
        return ReactionsRead("unchanged", etag=etag)

    def repository_private(self, ref: TicketRef) -> bool:
        """Public: only the users named in ``writers`` count."""
        return False

    def own_login(self, ref: TicketRef) -> str | None:
        """Nobody: a dry run has no account."""
        return None


__all__ = [
    "CommentText",
    "DryRunEffects",
    "Effects",
    "JiraCommentSeen",
    "LiveEffects",
    "NotConfigured",
    "TicketRef",
    "log_effect",
]
