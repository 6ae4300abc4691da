"""Typed views of the webhook payloads handlers read: each field checked and bounded once.

A payload that does not fit raises pydantic's ValidationError, which the worker records as a
permanent failure naming the field (`invalid payload: pull_request.number: ...`). Free text is
cut to the lengths GitHub and Jira themselves allow and loses NUL characters, which
PostgreSQL cannot store; identifiers that do not look like identifiers are refused.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from playbook.deliveries import tickets
from playbook.lessons.fields import printable
from playbook.search.text import Ticket

# GitHub caps issue, PR and comment bodies at 65,536 characters and titles at 256; Jira caps
# summaries at 255 and comments at 32,767. Anything longer did not come from them.
BODY_CHARS = 65_536
TITLE_CHARS = 1_024
NAME_CHARS = 255
URL_CHARS = 2_048
MAX_LABELS = 200


def _bounded(limit: int) -> Any:
    return AfterValidator(lambda value: printable(value)[:limit])


def _none_to_empty(value: Any) -> Any:
    return "" if value is None else value


Body = Annotated[str, BeforeValidator(_none_to_empty), _bounded(BODY_CHARS)]
Title = Annotated[str, BeforeValidator(_none_to_empty), _bounded(TITLE_CHARS)]
Name = Annotated[str, _bounded(NAME_CHARS)]
Url = Annotated[str, _bounded(URL_CHARS)]
Number = Annotated[int, Field(strict=True, ge=1, le=2**31 - 1)]
BigId = Annotated[int, Field(strict=True, ge=1, le=2**63 - 1)]
# owner/name as GitHub allows them (owners: letters, digits, hyphens; names add . and _).
RepoName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")]
# A git commit id: SHA-1 (40 hex digits) or SHA-256 (64).
CommitSha = Annotated[str, Field(pattern=r"^[0-9a-fA-F]{40}([0-9a-fA-F]{24})?$")]
# GitHub logins, and App bots as `name[bot]`.
Login = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,100}(\[bot\])?$")]


def _jira_key(value: str) -> str:
    """``value`` when it is a Jira issue key by the one rule the receiver also applies."""
    if tickets.jira_key(value) is None:
        raise ValueError("must be a Jira issue key such as PB-12")
    return value


# Atlassian's project keys: a letter, then letters, digits or underscores; then the number.
JiraKey = Annotated[str, AfterValidator(_jira_key)]
JiraId = Annotated[
    str,
    BeforeValidator(lambda v: str(v) if isinstance(v, int) else v),
    Field(pattern=r"^[0-9]{1,30}$"),
]


def _lenient_time(value: Any) -> datetime | None:
    """A tracker's timestamp (GitHub ``...Z``, Jira ``...+0000``), or None when unreadable:
    a creation time only measures time to merge, so a bad one never fails a delivery."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


Created = Annotated[datetime | None, BeforeValidator(_lenient_time)]


class Model(BaseModel):
    """Base: unknown fields ignored (payloads carry far more than handlers read)."""

    model_config = ConfigDict(extra="ignore", frozen=True)


# --- GitHub ----------------------------------------------------------------------------------


class User(Model):
    """A GitHub account as payloads name it."""

    login: Login
    type: str | None = None


class Label(Model):
    """A GitHub label."""

    name: Name


class Repository(Model):
    """The repository a delivery is about."""

    full_name: RepoName


class Issue(Model):
    """A GitHub issue (or a PR seen as an issue, which carries ``pull_request``)."""

    number: Number
    title: Title = ""
    body: Body = ""
    labels: list[Label] = Field(default_factory=list, max_length=MAX_LABELS)
    pull_request: dict[str, Any] | None = None
    user: User | None = None
    created_at: Created = None

    def ticket(self, repo: str) -> Ticket:
        """The issue as retrieval sees it."""
        return Ticket(
            key=f"{repo}#{self.number}",
            summary=self.title,
            description=self.body or None,
            labels=tuple(label.name for label in self.labels),
            scope=repo,
        )


class Comment(Model):
    """An issue, PR or review comment."""

    id: BigId
    body: Body = ""
    user: User | None = None
    html_url: Url | None = None


class Ref(Model):
    """A branch of a PR, and the commit it points at (what ``This reverts commit`` names)."""

    ref: Title = ""
    sha: CommitSha | None = None


class PullRequest(Model):
    """A pull request as the pull_request events carry it."""

    number: Number
    title: Title = ""
    body: Body = ""
    state: Literal["open", "closed"] = "open"
    merged: bool | None = None
    merged_at: datetime | None = None
    closed_at: datetime | None = None
    updated_at: datetime | None = None
    head: Ref | None = None
    html_url: Url | None = None
    labels: list[Label] = Field(default_factory=list, max_length=MAX_LABELS)
    user: User | None = None
    # Set once merged: the merge, squash or last rebased commit, and who merged it.
    merge_commit_sha: CommitSha | None = None
    merged_by: User | None = None


class IssuesEvent(Model):
    """issues.opened/edited/labeled/unlabeled."""

    issue: Issue
    repository: Repository


class IssueCommentEvent(Model):
    """issue_comment.created."""

    issue: Issue
    comment: Comment
    repository: Repository


class PullRequestEvent(Model):
    """pull_request.*; ``sender`` is who did it (who closed the PR, for closed)."""

    pull_request: PullRequest
    repository: Repository
    sender: User | None = None


class ReviewedPull(Model):
    """The PR of a review event."""

    number: Number


class ReviewBody(Model):
    """A review or review comment: only its text matters here."""

    body: Body = ""


class Review(ReviewBody):
    """A submitted review: its text, and for review rounds its id, state and time.

    Optional, so a payload without them still validates (its text may still cite); the state
    is GitHub's word (``approved``, ``changes_requested``, ``commented``), kept as sent.
    """

    id: BigId | None = None
    state: Name | None = None
    submitted_at: Created = None


class ReviewEvent(Model):
    """pull_request_review.submitted and pull_request_review_comment.created."""

    pull_request: ReviewedPull
    repository: Repository
    review: Review | None = None
    comment: ReviewBody | None = None


class Account(Model):
    """The account an App is installed on."""

    login: Name | None = None


class InstallationData(Model):
    """An installation of the App."""

    id: BigId
    account: Account | None = None


class InstallationEvent(Model):
    """installation.created/deleted/suspend/unsuspend."""

    installation: InstallationData


# --- Jira ------------------------------------------------------------------------------------


class JiraUser(Model):
    """A Jira user: accountId on Cloud, key and name on Data Center."""

    accountId: Name | None = None
    key: Name | None = None
    name: Name | None = None


class NamedThing(Model):
    """A component, a project: something with a name or key."""

    name: Name | None = None
    key: Name | None = None


class JiraFields(Model):
    """The issue fields retrieval reads."""

    summary: Title = ""
    description: Body | None = None
    labels: list[Name] = Field(default_factory=list, max_length=MAX_LABELS)
    components: list[NamedThing] = Field(default_factory=list, max_length=MAX_LABELS)
    project: NamedThing | None = None
    created: Created = None


class JiraIssue(Model):
    """A Jira issue as webhooks carry it."""

    key: JiraKey
    fields: JiraFields = Field(default_factory=JiraFields)

    @property
    def project(self) -> str:
        """The project key (from the fields, else from the issue key)."""
        if self.fields.project and self.fields.project.key:
            return self.fields.project.key
        return self.key.rsplit("-", 1)[0]

    def ticket(self) -> Ticket:
        """The issue as retrieval sees it."""
        labels = list(self.fields.labels) + [c.name for c in self.fields.components if c.name]
        return Ticket(
            key=self.key,
            summary=self.fields.summary,
            description=self.fields.description or None,
            labels=tuple(labels),
            scope=self.project,
        )


class ChangeItem(Model):
    """One changed field of jira:issue_updated."""

    field: Name = ""


class Changelog(Model):
    """What an update changed."""

    items: list[ChangeItem] = Field(default_factory=list, max_length=1000)


class JiraIssueEvent(Model):
    """jira:issue_created and jira:issue_updated."""

    issue: JiraIssue
    changelog: Changelog | None = None


class JiraComment(Model):
    """A Jira comment as webhooks carry it (its author is checked against Jira's API)."""

    id: JiraId
    body: Body = ""
    author: JiraUser | None = None


class JiraCommentEvent(Model):
    """comment_created."""

    issue: JiraIssue
    comment: JiraComment


# A push payload lists at most 2,048 commits; a commit's file lists are bounded the same way.
Path = Annotated[str, _bounded(4_096)]


class PushedCommit(Model):
    """One commit of a push: the files it added, changed or removed."""

    added: list[Path] = Field(default_factory=list, max_length=10_000)
    modified: list[Path] = Field(default_factory=list, max_length=10_000)
    removed: list[Path] = Field(default_factory=list, max_length=10_000)

    def touches(self, path: str) -> bool:
        """Whether this commit changed ``path``."""
        return path in self.added or path in self.modified or path in self.removed


class PushedRepository(Model):
    """The repository a push went to, with its default branch."""

    full_name: RepoName
    default_branch: Name = "main"


class PushEvent(Model):
    """push: which branch moved and which files its commits touched."""

    ref: Name
    repository: PushedRepository
    commits: list[PushedCommit] = Field(default_factory=list, max_length=2_048)
    head_commit: PushedCommit | None = None
