"""SQLAlchemy models: bullets, their append-only usage events and revisions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
    true,
)
from sqlalchemy.orm import Mapped, mapped_column

from playbook.model_base import NAMING, Base, BigId, UTCDateTime  # noqa: F401 (re-exported)

# superseded: replaced by a newer lesson (``superseded_by``); kept, not retrieved (issue 29).
STATUSES = ("proposed", "active", "deprecated", "archived", "superseded")
# ignored: nothing to do (with why); failed: will retry; dead: kept for `deliveries replay`.
DELIVERY_STATUSES = ("pending", "done", "ignored", "failed", "dead")
# permanent: a retry fails the same way; transient: network, 5xx, database; rate_limited:
# waits for the reset, not counted; unexpected: a bug, or a worker that stopped mid-way.
ERROR_KINDS = ("permanent", "transient", "rate_limited", "unexpected")
EVENT_KINDS = ("loaded", "cited")


class Bullet(Base):
    """One lesson of the playbook, with its lifecycle state and usage counters."""

    __tablename__ = "bullets"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    # The n of a `pb-<n>` id, so new ids can be allocated without parsing strings in SQL.
    number: Mapped[int | None] = mapped_column(Integer, unique=True)
    text: Mapped[str] = mapped_column(Text)
    section: Mapped[str] = mapped_column(String(64), default="best_practice")
    tags: Mapped[list[str]] = mapped_column(JSON, default=list)
    scope: Mapped[str] = mapped_column(String(200), default="global", index=True)
    learned_from: Mapped[str | None] = mapped_column(String(200), index=True)
    source: Mapped[str | None] = mapped_column(String(50))
    source_url: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16), default="active", index=True)
    demoted_on: Mapped[datetime | None] = mapped_column(UTCDateTime)
    demoted_reason: Mapped[str | None] = mapped_column(Text)
    # The lesson that replaces this one while its status is ``superseded``; None otherwise.
    superseded_by: Mapped[str | None] = mapped_column(String(64), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    loads: Mapped[int] = mapped_column(Integer, default=0)
    cites: Mapped[int] = mapped_column(Integer, default=0)
    cites_success: Mapped[int] = mapped_column(Integer, default=0)
    cites_failure: Mapped[int] = mapped_column(Integer, default=0)
    last_loaded_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Indexed: feedback ranking asks for the few cited lessons among many that never were.
    last_cited_at: Mapped[datetime | None] = mapped_column(UTCDateTime, index=True)
    # The playbook version of its last change: an index at v refreshes those past v.
    version: Mapped[int] = mapped_column(BigInteger, default=0, index=True)
    # Model ratings' count and sum (`playbook.ratings`); indexed for the few rated up.
    ratings: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    rating_sum: Mapped[float] = mapped_column(Float, default=0.0, server_default="0", index=True)
    # Anchors to code: repository-relative globs and function or class names the lesson is
    # about (None: anchored only to its ticket). `playbook.anchors` validates them.
    paths: Mapped[list[str] | None] = mapped_column(JSON)
    symbols: Mapped[list[str] | None] = mapped_column(JSON)
    # A merged PR changed, renamed or removed what it is anchored to: flagged for a maintainer,
    # never deprecated by the flag itself (None: not flagged). What changed, and which PR.
    stale_since: Mapped[datetime | None] = mapped_column(UTCDateTime, index=True)
    stale_detail: Mapped[str | None] = mapped_column(Text)
    stale_pr: Mapped[str | None] = mapped_column(String(200))


class UsageEvent(Base):
    """An append-only record that a bullet was shown to (loaded) or referenced by (cited) work."""

    __tablename__ = "usage_events"
    __table_args__ = (
        Index("ix_usage_events_bullet_ts", "bullet_id", "ts"),
        Index("ix_usage_events_ticket", "ticket_key"),
        Index("ix_usage_events_query", "query_id"),
        # The one-outcome-per-source rule looks up a reporter's rated cites of a lesson.
        Index("ix_usage_events_source_bullet", "source", "bullet_id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(8))
    bullet_id: Mapped[str] = mapped_column(ForeignKey("bullets.id"))
    ticket_key: Mapped[str | None] = mapped_column(String(200))
    phase: Mapped[str | None] = mapped_column(String(64))
    consumer: Mapped[str | None] = mapped_column(String(200))
    # None means the outcome is not known (yet); a PR outcome may settle it later.
    success: Mapped[bool | None] = mapped_column(Boolean)
    rank: Mapped[int | None] = mapped_column(Integer)
    query_id: Mapped[str | None] = mapped_column(String(64))
    ts: Mapped[datetime] = mapped_column(UTCDateTime)
    # Set for imported events so importing the same log twice adds nothing.
    dedup_key: Mapped[str | None] = mapped_column(String(64), unique=True)
    # The pull request a cite was made in (owner/repo#n), so the PR's outcome can settle it.
    pr_key: Mapped[str | None] = mapped_column(String(200), index=True)
    # Who reported it (agent:ci); None for what the bot saw (playbook/outcomes/self_reports).
    source: Mapped[str | None] = mapped_column(String(200))
    # False: recorded for reporting only; it moves no counter, ranking or pruning.
    counted: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    # The outcome a reporter claimed when it was not counted as a rating (`success` is None).
    claimed_success: Mapped[bool | None] = mapped_column(Boolean)
    # Why the report weighs less than it claims (unknown_ticket, one_per_source, ...).
    discount: Mapped[str | None] = mapped_column(String(32))


class Revision(Base):
    """An append-only record of one change to a bullet, with the values before and after."""

    __tablename__ = "revisions"
    __table_args__ = (Index("ix_revisions_bullet_at", "bullet_id", "at"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    bullet_id: Mapped[str] = mapped_column(ForeignKey("bullets.id"))
    action: Mapped[str] = mapped_column(String(32))
    actor: Mapped[str] = mapped_column(String(200))
    at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    reason: Mapped[str | None] = mapped_column(Text)
    before: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class PlaybookMeta(Base):
    """Small named counters, e.g. the playbook version other processes poll to refresh caches."""

    __tablename__ = "playbook_meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[int] = mapped_column(BigInteger, default=0)


class Delivery(Base):
    """One webhook delivery in the inbox: stored before it is acknowledged, processed once."""

    __tablename__ = "deliveries"
    __table_args__ = (
        # Insert-if-absent on this pair is what makes redeliveries and retries harmless.
        UniqueConstraint("source", "delivery_id", name="uq_deliveries_source_delivery_id"),
        Index("ix_deliveries_due", "status", "next_attempt_at"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    source: Mapped[str] = mapped_column(String(16))
    event: Mapped[str] = mapped_column(String(100))
    action: Mapped[str | None] = mapped_column(String(100))
    delivery_id: Mapped[str] = mapped_column(String(200))
    installation_id: Mapped[int | None] = mapped_column(BigInteger)
    # The ticket it is about (``PB-12``, ``owner/repo#12``; playbook.deliveries.tickets).
    ticket_key: Mapped[str | None] = mapped_column(String(200))
    headers: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    payload: Mapped[str] = mapped_column(Text)
    # Indexed for the retention purge, which deletes by age.
    received_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    error_kind: Mapped[str | None] = mapped_column(String(16))
    # The full traceback of the last failure, for `deliveries show`.
    last_traceback: Mapped[str | None] = mapped_column(Text)
    # Why an ignored delivery needed nothing done.
    reason: Mapped[str | None] = mapped_column(Text)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # A worker owns a claimed row until this time; a worker killed mid-delivery loses it then.
    locked_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    locked_by: Mapped[str | None] = mapped_column(String(200))
    processed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class PullRequest(Base):
    """A pull request the bot has seen, with its latest known state."""

    __tablename__ = "pull_requests"

    key: Mapped[str] = mapped_column(String(200), primary_key=True)  # owner/repo#12
    repo: Mapped[str] = mapped_column(String(200))
    number: Mapped[int] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(Text, default="")
    head_ref: Mapped[str] = mapped_column(String(300), default="")
    url: Mapped[str | None] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16), default="open")  # open | closed | merged
    installation_id: Mapped[int | None] = mapped_column(BigInteger)
    # GitHub's updated_at of the payload we last applied: older deliveries never win.
    source_updated_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    closed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    merged_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # The evidence last applied ("closed@<time>", "merged@<time>"): applied once, however often
    # it arrives again (an edit of a closed PR, a redelivery, a backfill).
    outcome_evidence: Mapped[str | None] = mapped_column(String(100))
    # The commits a revert names ("This reverts commit <sha>"): the PR's head and merge commits.
    head_sha: Mapped[str | None] = mapped_column(String(64), index=True)
    merge_commit_sha: Mapped[str | None] = mapped_column(String(64), index=True)
    # The merged PR this one reverts (owner/repo#n), once a revert signal names it.
    reverts: Mapped[str | None] = mapped_column(String(200), index=True)
    # The merged revert in force (owner/repo#m): this PR's outcome is ``reverted`` while set.
    reverted_by: Mapped[str | None] = mapped_column(String(200))


class TicketLink(Base):
    """A pull request is about a ticket (a Jira key or a GitHub issue it closes)."""

    __tablename__ = "ticket_links"
    __table_args__ = (UniqueConstraint("ticket_key", "pr_key", name="uq_ticket_links_ticket_pr"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    ticket_key: Mapped[str] = mapped_column(String(200), index=True)
    pr_key: Mapped[str] = mapped_column(ForeignKey("pull_requests.key"), index=True)
    kind: Mapped[str] = mapped_column(String(16))  # jira | closes
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class BotComment(Base):
    """A comment the bot keeps on a ticket: reserved before it is posted, so it is posted once.

    ``purpose`` is ``lessons`` for the one lessons comment a ticket has (edits replace it)
    or ``reply:<comment id>`` for the answer to one command comment.
    """

    __tablename__ = "bot_comments"
    __table_args__ = (
        UniqueConstraint(
            "target", "ticket_key", "purpose", name="uq_bot_comments_target_ticket_purpose"
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    target: Mapped[str] = mapped_column(String(16))  # github | jira
    ticket_key: Mapped[str] = mapped_column(String(200))
    purpose: Mapped[str] = mapped_column(String(100), default="lessons")
    # posting: an attempt began and its outcome is not known yet; posted: external_id is it.
    state: Mapped[str] = mapped_column(String(16), default="posted")
    claimed_by: Mapped[str | None] = mapped_column(String(200))
    claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    external_id: Mapped[str | None] = mapped_column(String(100))
    bullet_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    body: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # The relevance estimate of each lesson in ``bullet_ids`` when it was shown (same order):
    # a reaction or reply about the comment becomes a labelled pair with the estimate it judged.
    relevances: Mapped[list[float] | None] = mapped_column(JSON)
    # Reading its reactions: the ETag of the last answer (an unchanged comment then costs a
    # 304, which GitHub does not count against the rate limit) and when they were last read.
    reactions_etag: Mapped[str | None] = mapped_column(String(200))
    reactions_read_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class SideEffect(Base):
    """An append-only log of what the bot did, or would have done, on GitHub and Jira."""

    __tablename__ = "side_effects"
    # Finding whether a skipped comment was posted since looks its slot up by ticket.
    __table_args__ = (Index("ix_side_effects_ticket_purpose", "ticket_key", "purpose"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    delivery_id: Mapped[str | None] = mapped_column(String(200), index=True)
    target: Mapped[str] = mapped_column(String(16))
    action: Mapped[str] = mapped_column(String(32))
    ticket_key: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))  # done | skipped | dry_run
    detail: Mapped[str | None] = mapped_column(Text)
    at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    # For comments: the text, slot and lessons, so a skipped one can be posted later.
    body: Mapped[str | None] = mapped_column(Text)
    purpose: Mapped[str | None] = mapped_column(String(100))
    bullet_ids: Mapped[list[str] | None] = mapped_column(JSON)
    # The GitHub installation to post as; a TicketRef's key does not carry it.
    installation_id: Mapped[int | None] = mapped_column(BigInteger)


class WorkerHeartbeat(Base):
    """A worker's last sign of life, so `/readyz` can tell whether anything processes the inbox."""

    __tablename__ = "worker_heartbeats"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    beat_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class Installation(Base):
    """A GitHub App installation; the bot stops acting for deleted ones."""

    __tablename__ = "installations"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    account: Mapped[str | None] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), default="active")  # active | deleted
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    deleted_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Retrieval(Base):
    """One search for a ticket: what was shown, so coverage and cite rates can be reported."""

    __tablename__ = "retrievals"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    ticket_key: Mapped[str | None] = mapped_column(String(200), index=True)
    query_id: Mapped[str] = mapped_column(String(64), index=True)
    rank_by: Mapped[str] = mapped_column(String(16))
    bullet_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    # The ticket's summary and the text searched (bounded), for gaps; None without a ticket.
    title: Mapped[str | None] = mapped_column(Text)
    text: Mapped[str | None] = mapped_column(Text)
    # For the bot's own comment searches: True when a comment shows lessons, False when none
    # reached the relevance floor and the bot kept quiet (None: an agent's or a held-out search).
    spoke: Mapped[bool | None] = mapped_column(Boolean)


class Lease(Base):
    """A named lock with an expiry, held by one process at a time (scheduled jobs)."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    holder: Mapped[str | None] = mapped_column(String(200))
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)


class IndexSnapshot(Base):
    """A saved search index of the live lessons at one playbook version, for fast cold starts.

    A process starting up loads the newest snapshot made by the same tokenizer and reads only
    the lessons changed since its version, instead of tokenizing every lesson again.
    """

    __tablename__ = "index_snapshots"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger)
    tokenizer: Mapped[int] = mapped_column(Integer)
    documents: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    data: Mapped[bytes] = mapped_column(LargeBinary)

    __table_args__ = (Index("ix_index_snapshots_tokenizer_version", "tokenizer", "version"),)


class SeenTicket(Base):
    """A ticket the bot has seen through a verified delivery (an issue, or a PR naming it).

    Only these tickets give weight to what agents report about them: an agent can name any
    ticket, but it cannot make GitHub or Jira send a signed delivery about it.
    """

    __tablename__ = "seen_tickets"

    ticket_key: Mapped[str] = mapped_column(String(200), primary_key=True)
    via: Mapped[str] = mapped_column(String(16))  # github | jira | pull_request
    seen_at: Mapped[datetime] = mapped_column(UTCDateTime)


class RateWindow(Base):
    """Requests one caller made in one fixed window, shared by every process (rate limits)."""

    __tablename__ = "rate_windows"

    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    # The window's start, in whole seconds since the epoch.
    window_start: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    hits: Mapped[int] = mapped_column(Integer, default=0)


# The holdout's two arms (issue 27): a ticket is shown lessons, or held out of them.
EXPERIMENT_ARMS = ("shown", "held_out")


class ExperimentAssignment(Base):
    """A ticket's arm in the holdout and the percentage in force, fixed when first seen."""

    __tablename__ = "experiment_assignments"

    # Canonical spelling (playbook.experiment.assignment.canonical): PB-12, owner/repo#12.
    ticket_key: Mapped[str] = mapped_column(String(200), primary_key=True)
    arm: Mapped[str] = mapped_column(String(16))  # one of EXPERIMENT_ARMS
    percent: Mapped[int] = mapped_column(Integer)
    assigned_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    # The key as the bot's other tables spell it (ticket_links, usage_events): the join key.
    ticket_ref: Mapped[str | None] = mapped_column(String(200), index=True)
    # When the ticket was created (the tracker's own time), for time to merge.
    created_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # From its linked PRs (playbook/experiment/outcomes.py), recomputed when one changes:
    # merged | closed (unmerged) | open; None while no pull request is linked.
    outcome: Mapped[str | None] = mapped_column(String(16))
    merged_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # A pull request of it closed unmerged, whatever came after (kept with a later merge).
    closed_unmerged: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # Changes-requested reviews on its pull requests before the first merge (or so far).
    review_rounds: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class ExperimentExposure(Base):
    """A lesson shown to an experiment ticket (arm shown, mirroring its load) or one the bot
    would have shown it (arm held_out): never a load, never counted anywhere but the report."""

    __tablename__ = "experiment_exposures"
    __table_args__ = (
        UniqueConstraint("ticket_key", "bullet_id", name="uq_experiment_exposures_ticket_bullet"),
        Index("ix_experiment_exposures_bullet_arm", "bullet_id", "arm"),
        # Covers the report's per-lesson count (tickets walked in key order, each exposure's
        # lesson and arm read from the index alone): 1M exposures in under a second on SQLite.
        Index("ix_experiment_exposures_ticket_bullet_arm", "ticket_key", "bullet_id", "arm"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    # Canonical spelling, as in experiment_assignments.
    ticket_key: Mapped[str] = mapped_column(String(200))
    bullet_id: Mapped[str] = mapped_column(ForeignKey("bullets.id"))
    arm: Mapped[str] = mapped_column(String(16))
    rank: Mapped[int | None] = mapped_column(Integer)
    query_id: Mapped[str | None] = mapped_column(String(64))
    consumer: Mapped[str | None] = mapped_column(String(200))
    at: Mapped[datetime] = mapped_column(UTCDateTime)


class ExperimentReview(Base):
    """A changes-requested review of a pull request: one review round, counted once."""

    __tablename__ = "experiment_reviews"

    # GitHub's review id: a redelivered review is the same row.
    review_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    pr_key: Mapped[str] = mapped_column(String(200), index=True)
    submitted_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ExperimentPeriod(Base):
    """A period the holdout ran, at one percentage: who started and stopped it, and when."""

    __tablename__ = "experiment_periods"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    percent: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    started_by: Mapped[str] = mapped_column(String(200))
    # Both unset while the period runs.
    stopped_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    stopped_by: Mapped[str | None] = mapped_column(String(200))


class ExperimentSalt(Base):
    """The one generated key of the holdout's hash, when PLAYBOOK_EXPERIMENT_SALT is unset."""

    __tablename__ = "experiment_salt"

    # Always 1: the primary key makes a second salt impossible, so racing first uses agree.
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    value: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class RepoSettingsRow(Base):
    """A repository's `.github/playbook-bot.yml` as last read: its last good values and problems.

    Kept in the database, not in a process: every web and worker process, `config --repo`,
    `doctor` and the web page see the same settings, and a push that changes the file marks
    the row stale once for all of them.
    """

    __tablename__ = "repo_settings"

    repo: Mapped[str] = mapped_column(String(200), primary_key=True)
    installation_id: Mapped[int | None] = mapped_column(BigInteger)
    # Blob shas of the files last read (None: no such file); unchanged sha, nothing re-parsed.
    repo_sha: Mapped[str | None] = mapped_column(String(64))
    org_sha: Mapped[str | None] = mapped_column(String(64))
    # The last good values of each file (None: never a good one), as the file spelled them.
    repo_values: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    org_values: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # What is wrong with the files as they are now: [{file, key, line, message}].
    problems: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    read_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The last attempt, read or not: a failing GitHub is asked again after a minute.
    tried_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # A push touched a file: read again on next use, whatever read_at says.
    stale: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # Why the last read failed (GitHub unreachable, no permission), or None.
    error: Mapped[str | None] = mapped_column(Text)


class RuleFileSync(Base):
    """The managed block the bot keeps in one repository's rule file, and its one sync PR."""

    __tablename__ = "rule_file_syncs"

    repo: Mapped[str] = mapped_column(String(200), primary_key=True)
    path: Mapped[str] = mapped_column(String(200))
    pull_number: Mapped[int | None] = mapped_column(Integer)
    pull_url: Mapped[str | None] = mapped_column(Text)
    # sha256 of the block last committed to the sync branch: unchanged, nothing is committed.
    block_sha: Mapped[str | None] = mapped_column(String(64))
    lesson_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    # A person closed the sync PR unmerged: no sync before this time.
    paused_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    paused_reason: Mapped[str | None] = mapped_column(Text)
    synced_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # One line: what the last sync did or why it did nothing.
    last_result: Mapped[str | None] = mapped_column(Text)
    # The path-scoped rule files the sync keeps beside the block (`.github/instructions/...`,
    # `.cursor/rules/...`, `.claude/rules/...`): each file's path and the sha256 of its text.
    files: Mapped[dict[str, str] | None] = mapped_column(JSON)


# The tables of the optional model features (ratings, budgets, consolidation, embeddings) and
# of fit feedback live in their own modules; imported here so the metadata has them all.
from playbook.fit.tables import FitCalibration, FitLabel  # noqa: E402, F401
from playbook.model_tables import Consolidation, Embedding, ModelUsage, Rating  # noqa: E402, F401
