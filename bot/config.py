"""Settings read from environment variables (and an optional .env file)."""

from __future__ import annotations

from contextlib import suppress
from typing import TYPE_CHECKING, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from bot.agent_tokens import AgentToken, agent_tokens
from bot.settings_first_run import FirstRunSettings
from playbook import scope_names
from playbook.outcomes.demote_policy import DemotePolicy
from playbook.reviews.capture_from import CaptureFrom, CaptureSetting

if TYPE_CHECKING:
    from playbook.experiment import holdout


class Settings(FirstRunSettings):
    """Everything a deployment may change, each with a default that works out of the box.

    The first run's settings (public URL, data directory, GitHub's web host) are inherited.
    """

    # protected_namespaces=(): the model endpoint's settings are named model_*, which pydantic
    # before 2.10 warns about (it reserves the prefix for its own methods).
    model_config = SettingsConfigDict(
        env_file=".env", extra="ignore", populate_by_name=True, protected_namespaces=()
    )

    database_url: str = Field(
        "sqlite:///playbook.db",
        validation_alias="PLAYBOOK_DATABASE_URL",
        description="SQLAlchemy URL of the playbook database.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = Field(
        "INFO", validation_alias="LOG_LEVEL"
    )
    log_format: Literal["text", "json"] = Field("text", validation_alias="LOG_FORMAT")
    actor: str | None = Field(
        None,
        validation_alias="PLAYBOOK_ACTOR",
        description="Name recorded in revisions made from the CLI (default cli:<login>).",
    )

    # The webhook receiver.
    github_webhook_secret: str | None = Field(
        None,
        validation_alias="GITHUB_WEBHOOK_SECRET",
        description="Secret of the GitHub App's webhook; deliveries are refused without it.",
    )
    jira_webhook_secret: str | None = Field(
        None,
        validation_alias="JIRA_WEBHOOK_SECRET",
        description="Secret of the Jira webhook (HMAC) or bearer token of an Automation rule.",
    )
    jira_allow_unsigned: bool = Field(
        False,
        validation_alias="PLAYBOOK_JIRA_ALLOW_UNSIGNED",
        description="Accept Jira deliveries without JIRA_WEBHOOK_SECRET. Local testing only.",
    )
    insecure_skip_verify: bool = Field(
        False,
        validation_alias="PLAYBOOK_INSECURE_SKIP_VERIFY",
        description="Accept unsigned GitHub deliveries. Local development only.",
    )
    max_body_bytes: int = Field(
        25 * 1024 * 1024,
        gt=0,
        validation_alias="PLAYBOOK_MAX_BODY_BYTES",
        description="Largest webhook body accepted (GitHub caps payloads at 25 MB).",
    )
    client_timeout_seconds: int = Field(
        10,
        ge=1,
        validation_alias="PLAYBOOK_CLIENT_TIMEOUT_SECONDS",
        description="How long the web server waits on a client: `serve` closes a connection "
        "that sends nothing for this long, and under gunicorn a request's body must arrive "
        "within it (else 408). GitHub gives up on an answer after 10 s.",
    )
    api_token: str | None = Field(
        None,
        validation_alias="PLAYBOOK_API_TOKEN",
        description="Maintainer token for /api/v1 and /mcp: read, search, propose, approve, "
        "deprecate, restore. The API is off without it and PLAYBOOK_AGENT_TOKENS.",
    )
    metrics_token: str | None = Field(
        None,
        validation_alias="PLAYBOOK_METRICS_TOKEN",
        description="Bearer token for /metrics (Prometheus); unset, PLAYBOOK_API_TOKEN opens "
        "it, and with neither /metrics answers 503.",
    )
    agent_tokens: str = Field(
        "",
        validation_alias="PLAYBOOK_AGENT_TOKENS",
        description="Comma-separated agent tokens (read, search, record usage, propose), each "
        "`token`, `name:token` or `name@scope:token`.",
    )
    agent_scope: str | None = Field(
        None,
        validation_alias="PLAYBOOK_AGENT_SCOPE",
        description="The repository (owner/repo) or Jira project agents work in, for tokens "
        "without their own scope and for `playbook-bot mcp`; unset, agents see every scope.",
    )
    agent_writes_per_minute: int = Field(
        60,
        ge=0,
        validation_alias="PLAYBOOK_AGENT_WRITES_PER_MINUTE",
        description="Usage reports and proposals one agent token may send a minute (API and "
        "MCP, counted in the database across processes); more answer 429. 0: no limit. The "
        "maintainer token is not limited.",
    )

    # The maintainers' web page (/ui).
    ui_public_read: bool = Field(
        False,
        validation_alias="PLAYBOOK_UI_PUBLIC_READ",
        description="Show the read-only pages of /ui (lessons, proposals, stats) without a "
        "login; changing anything, and deliveries, still need the maintainer token.",
    )
    ui_secure_cookie: bool = Field(
        False,
        validation_alias="PLAYBOOK_UI_SECURE_COOKIE",
        description="Send the /ui login cookie over HTTPS only; set it when served behind TLS.",
    )
    ui_session_hours: float = Field(
        12.0,
        gt=0,
        validation_alias="PLAYBOOK_UI_SESSION_HOURS",
        description="How long a /ui login lasts.",
    )

    # The worker.
    worker_poll_seconds: float = Field(1.0, gt=0, validation_alias="PLAYBOOK_WORKER_POLL_SECONDS")
    worker_lease_seconds: float = Field(
        300.0,
        gt=0,
        validation_alias="PLAYBOOK_WORKER_LEASE_SECONDS",
        description="How long a claimed delivery stays with its worker before another may take it.",
    )
    worker_batch: int = Field(10, gt=0, validation_alias="PLAYBOOK_WORKER_BATCH")
    max_attempts: int = Field(
        5,
        gt=0,
        validation_alias="PLAYBOOK_MAX_ATTEMPTS",
        description="Attempts before a failing delivery is dead.",
    )
    retry_base_seconds: float = Field(10.0, gt=0, validation_alias="PLAYBOOK_RETRY_BASE_SECONDS")
    worker_heartbeat_timeout: float = Field(
        60.0,
        gt=0,
        validation_alias="PLAYBOOK_WORKER_HEARTBEAT_TIMEOUT",
        description="/readyz answers 503 when no worker has beaten for this many seconds.",
    )

    # GitHub.
    github_app_id: int | None = Field(None, validation_alias="GITHUB_APP_ID")
    github_app_private_key: str | None = Field(
        None, validation_alias="GITHUB_APP_PRIVATE_KEY", description="PEM text of the App's key."
    )
    github_app_private_key_file: str | None = Field(
        None, validation_alias="GITHUB_APP_PRIVATE_KEY_FILE"
    )
    github_token: str | None = Field(
        None,
        validation_alias="GITHUB_TOKEN",
        description="A personal access token, instead of an App, for a single repository.",
    )
    github_api_url: str = Field("https://api.github.com", validation_alias="GITHUB_API_URL")
    # PyGithub spaces requests as GitHub's secondary rate limits ask; tests turn this off.
    github_seconds_between_requests: float = Field(
        0.25, ge=0, validation_alias="PLAYBOOK_GITHUB_SECONDS_BETWEEN_REQUESTS"
    )
    github_seconds_between_writes: float = Field(
        1.0, ge=0, validation_alias="PLAYBOOK_GITHUB_SECONDS_BETWEEN_WRITES"
    )

    # Jira.
    jira_url: str | None = Field(None, validation_alias="JIRA_URL")
    jira_email: str | None = Field(None, validation_alias="JIRA_EMAIL")
    jira_api_token: str | None = Field(None, validation_alias="JIRA_API_TOKEN")
    jira_pat: str | None = Field(
        None, validation_alias="JIRA_PAT", description="Personal access token (Data Center)."
    )
    jira_allowed_users: str = Field(
        "",
        validation_alias="PLAYBOOK_JIRA_ALLOWED_USERS",
        description="Jira accountIds (Cloud) or user keys (Data Center) who may change it.",
    )
    jira_permission: str | None = Field(
        None,
        validation_alias="PLAYBOOK_JIRA_PERMISSION",
        description="A Jira project permission (e.g. ADMINISTER_PROJECTS) that also allows it.",
    )
    jira_review_field: str | None = Field(
        None,
        validation_alias="PLAYBOOK_JIRA_REVIEW_FIELD",
        description="Name of a Jira field that, when set, flags a ticket for human review.",
    )

    # What the bot does.
    comment_max_chars: int = Field(4000, ge=500, validation_alias="PLAYBOOK_COMMENT_MAX_CHARS")
    max_lesson_chars: int = Field(
        2000,
        ge=1,
        # CSV readers refuse fields over 131,072 characters; a lesson never needs that many.
        le=100_000,
        validation_alias="PLAYBOOK_MAX_LESSON_CHARS",
        description="Longest lesson text accepted by add, edit, import and the API.",
    )
    lessons_per_ticket: int = Field(5, ge=1, le=20, validation_alias="PLAYBOOK_LESSONS_PER_TICKET")
    # The packaged model's bench chose the default (playbook/search/relevance_model.json).
    min_relevance: float = Field(
        0.0275,
        ge=0.0,
        le=1.0,
        validation_alias="PLAYBOOK_MIN_RELEVANCE",
        description="Relevance floor: the bot comments only when a lesson's estimated chance "
        "of fitting the ticket reaches it (0 comments on every ticket, as before).",
    )
    say_nothing_fits: bool = Field(
        False,
        validation_alias="PLAYBOOK_SAY_NOTHING_FITS",
        description="Post a one-line note on a new ticket no lesson fits, instead of nothing.",
    )
    # Its meaning is the domain's (pull_outcome.decide); here it is only parsed.
    demote_policy: DemotePolicy = Field(
        DemotePolicy.ALWAYS, validation_alias="PLAYBOOK_DEMOTE_POLICY"
    )
    # off | heuristic | model (needs the model endpoint); playbook.reviews.proposals decides.
    capture_from_reviews: CaptureSetting = Field(
        CaptureFrom.HEURISTIC, validation_alias="PLAYBOOK_CAPTURE_FROM_REVIEWS"
    )
    review_label: str = Field("needs-human-review", validation_alias="PLAYBOOK_REVIEW_LABEL")
    agent_logins: str = Field(
        "",
        validation_alias="PLAYBOOK_AGENT_LOGINS",
        description="GitHub logins of agents whose closing of their own PR counts as rejection.",
    )
    superseded_cites_count_for_replacement: bool = Field(
        False,
        validation_alias="PLAYBOOK_SUPERSEDED_CITES_COUNT_FOR_REPLACEMENT",
        description="A cite of a superseded lesson also counts as a cite of the lesson that "
        "replaced it (its usage and, in a PR, its rating); by default it counts only for the "
        "old lesson.",
    )
    # Scheduled upkeep inside `serve` and `worker` (crontab syntax, UTC).
    scheduler_enabled: bool = Field(True, validation_alias="PLAYBOOK_SCHEDULER")
    prune_schedule: str = Field("0 3 * * *", validation_alias="PLAYBOOK_PRUNE_SCHEDULE")
    prune_apply: bool = Field(
        False,
        validation_alias="PLAYBOOK_PRUNE_APPLY",
        description="Let the scheduled prune archive; by default it only reports.",
    )
    prune_idle_days: int = Field(30, ge=1, validation_alias="PLAYBOOK_PRUNE_IDLE_DAYS")
    reconcile_schedule: str = Field("*/30 * * * *", validation_alias="PLAYBOOK_RECONCILE_SCHEDULE")
    retry_schedule: str = Field(
        "0 * * * *",
        validation_alias="PLAYBOOK_RETRY_SCHEDULE",
        description="Replays dead deliveries received in the last 72 hours.",
    )
    retention_days: int = Field(
        30,
        ge=3,
        validation_alias="PLAYBOOK_RETENTION_DAYS",
        description="Purge finished deliveries, side-effect and retrieval logs older than this.",
    )
    purge_schedule: str = Field(
        "30 4 * * *",
        validation_alias="PLAYBOOK_PURGE_SCHEDULE",
        description="When the retention purge runs.",
    )
    agents_md_schedule: str = Field(
        "15 5 * * *",
        validation_alias="PLAYBOOK_AGENTS_MD_SCHEDULE",
        description="When each repository's AGENTS.md block is synced (agents_md in its settings).",
    )
    rate_backfill_schedule: str = Field(
        "45 4 * * *",
        validation_alias="PLAYBOOK_RATE_BACKFILL_SCHEDULE",
        description="When a model is set: when rating jobs are queued for PRs of the last 90 "
        "days that showed lessons and have none (`rate --backfill`).",
    )
    embed_backfill_schedule: str = Field(
        "30 4 * * *",
        validation_alias="PLAYBOOK_EMBED_BACKFILL_SCHEDULE",
        description="When an embedding model is set: when embedding jobs are queued for active "
        "lessons with no current embedding (`embed --backfill`).",
    )
    reactions_schedule: str = Field(
        "40 * * * *",
        validation_alias="PLAYBOOK_REACTIONS_SCHEDULE",
        description="When 👍/👎 on the bot's GitHub lessons comments of the last 30 days are read "
        "as fit verdicts (an unchanged comment costs a 304, which GitHub does not count against "
        "the rate limit).",
    )
    reactions_batch: int = Field(
        200,
        gt=0,
        le=5000,
        validation_alias="PLAYBOOK_REACTIONS_BATCH",
        description="The most lessons comments one scheduled read of reactions looks at, those "
        "read longest ago first; the next run goes on from there.",
    )
    http_timeout_seconds: float = Field(10.0, gt=0, validation_alias="PLAYBOOK_HTTP_TIMEOUT")
    consolidate_schedule: str = Field(
        "0 6 * * *",
        validation_alias="PLAYBOOK_CONSOLIDATE_SCHEDULE",
        description="When each scope past 75% of its context budget gets consolidation "
        "proposals for its overlapping lessons (`consolidate`).",
    )

    # The controlled holdout (issue 27): off unless a percentage is set.
    holdout_percent: int = Field(
        0,
        ge=0,
        # Above half, the held-out arm would be the bigger one: most tickets would go without
        # the playbook to measure it, which is no longer a holdout.
        le=50,
        validation_alias="PLAYBOOK_HOLDOUT_PERCENT",
        description="Share of new tickets (0 to 50) that get no lessons, to measure what the "
        "playbook does; 0 turns the experiment off. A new value applies to new tickets only.",
    )
    # SecretStr: repr(settings), str(settings) and model_dump() show asterisks, never the salt.
    experiment_salt: SecretStr | None = Field(
        None,
        validation_alias="PLAYBOOK_EXPERIMENT_SALT",
        description="Secret key of the hash that assigns tickets to the holdout; unset, one is "
        "generated and stored in the database on first use. Changing it reshuffles new tickets.",
    )

    effect_min_tickets: int = Field(
        20,
        ge=1,
        le=100_000,
        validation_alias="PLAYBOOK_EFFECT_MIN_TICKETS",
        description="Tickets with an outcome each side of a lesson's measured effect needs before "
        "it is reported (and before it can mark the lesson measured harmful or helpful).",
    )

    # The context budget (issue 31): what an agent's context gives the lessons of one scope.
    context_budget: int = Field(
        8000,
        ge=2000,
        le=32_000,
        validation_alias="PLAYBOOK_CONTEXT_BUDGET",
        description="Characters of lessons one scope may fill in an agent's context (2,000 to "
        "32,000); past 75% of it, overlapping lessons get consolidation proposals.",
    )
    # The semantic rerank (issue 31): off unless an embedding model is set on the model endpoint.
    embedding_model: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        validation_alias="PLAYBOOK_EMBEDDING_MODEL",
        description="The embedding model on the model endpoint (PLAYBOOK_MODEL_BASE_URL); set, "
        "lessons are embedded by the worker and searches rerank by meaning.",
    )
    embedding_timeout_seconds: float = Field(
        1.0,
        gt=0,
        le=30,
        validation_alias="PLAYBOOK_EMBEDDING_TIMEOUT_SECONDS",
        description="How long a search waits for the ticket's embedding before it answers with "
        "the text ranking alone.",
    )
    rerank_candidates: int = Field(
        100,
        ge=10,
        le=1000,
        validation_alias="PLAYBOOK_RERANK_CANDIDATES",
        description="Lessons taken from the text ranking and from similarity each, to rerank.",
    )
    rerank_similarity_weight: float | None = Field(
        None,
        ge=0,
        le=1,
        validation_alias="PLAYBOOK_RERANK_SIMILARITY_WEIGHT",
        description="The similarity's share of the blended score (the rest is the text rank); "
        "unset, the measured default applies.",
    )

    # The model endpoint (issue 30): any OpenAI-compatible server; off unless URL and model are set.
    model_base_url: str | None = Field(
        None,
        validation_alias="PLAYBOOK_MODEL_BASE_URL",
        description="Base URL of an OpenAI-compatible endpoint, usually ending in /v1 (Ollama: "
        "http://localhost:11434/v1). The model is off unless this and PLAYBOOK_MODEL are set.",
    )
    model_name: str | None = Field(
        None,
        max_length=200,
        validation_alias="PLAYBOOK_MODEL",
        description="The chat model to ask, as the endpoint names it (llama3.1:8b, gpt-4o-mini).",
    )
    # SecretStr: repr(settings), str(settings) and model_dump() show asterisks, never the key.
    model_api_key: SecretStr | None = Field(
        None,
        validation_alias="PLAYBOOK_MODEL_API_KEY",
        description="API key sent to the endpoint as a bearer token; local servers need none.",
    )
    model_timeout_seconds: float = Field(
        60.0,
        gt=0,
        # A local model loading into memory can take a minute; past ten, the endpoint is down.
        le=600,
        validation_alias="PLAYBOOK_MODEL_TIMEOUT_SECONDS",
        description="How long one request to the model may take before it counts as failed.",
    )
    model_daily_calls: int = Field(
        500,
        ge=0,
        le=10_000_000,
        validation_alias="PLAYBOOK_MODEL_DAILY_CALLS",
        description="Requests to the model allowed per UTC day, retries included; 0 allows none.",
    )
    model_daily_tokens: int = Field(
        1_000_000,
        ge=0,
        le=100_000_000_000,
        validation_alias="PLAYBOOK_MODEL_DAILY_TOKENS",
        description="Prompt and completion tokens allowed per UTC day; 0 allows none.",
    )
    model_send_diffs: bool = Field(
        False,
        validation_alias="PLAYBOOK_MODEL_SEND_DIFFS",
        description="Also send a pull request's (bounded) diff to the model; by default only "
        "its title, body, commit messages and review comments are sent.",
    )

    @property
    def model_enabled(self) -> bool:
        """Whether a model endpoint is configured: both its URL and the model's name."""
        return bool(self.model_base_url and self.model_name)

    @property
    def embeddings_enabled(self) -> bool:
        """Whether the semantic rerank is on: the endpoint's URL and an embedding model."""
        return bool(self.model_base_url and self.embedding_model)

    @property
    def model_key(self) -> str | None:
        """PLAYBOOK_MODEL_API_KEY's value, for the client only: never show or log it."""
        return self.model_api_key.get_secret_value() if self.model_api_key else None

    @property
    def model_endpoint(self) -> str | None:
        """The endpoint's URL as shown to people: no credentials, no query string."""
        if not self.model_base_url:
            return None
        parts = urlsplit(self.model_base_url)
        host = parts.hostname or ""
        if ":" in host:  # an IPv6 address is written in brackets in a URL
            host = f"[{host}]"
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}".rstrip("/")

    @property
    def experiment(self) -> holdout.Config:
        """The holdout's settings as the domain reads them."""
        from playbook.experiment import holdout  # the database's models: not for every setting

        salt = self.experiment_salt.get_secret_value() if self.experiment_salt else None
        return holdout.Config(percent=self.holdout_percent, salt=salt or None)

    def secret_values(self) -> list[str]:
        """Every secret these settings hold, for scrubbing logs, errors and replies."""
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        values = [
            self.github_webhook_secret,
            self.jira_webhook_secret,
            self.api_token,
            self.metrics_token,
            *(agent.token for agent in self.agents_by_token.values()),
            *(agent.entry for agent in self.agents_by_token.values()),
            self.github_token,
            self.jira_api_token,
            self.jira_pat,
            self.experiment_salt.get_secret_value() if self.experiment_salt else None,
            self.database_url if "@" in self.database_url else None,
            self.model_key,
            # A base URL may carry a user and password (a proxy in front of the model).
            self.model_base_url if self.model_base_url and "@" in self.model_base_url else None,
            urlsplit(self.model_base_url).password if self.model_base_url else None,
        ]
        with suppress(ArgumentError):
            values.append(make_url(self.database_url).password)  # type: ignore[arg-type]
        key = self.github_app_private_key or ""
        values += [line for line in key.replace("\\n", "\n").splitlines() if "-----" not in line]
        return [str(value) for value in values if value]

    @property
    def jira_allowed(self) -> set[str]:
        """The Jira account ids / user keys that may change the playbook, as Jira spells them."""
        return {u.strip() for u in self.jira_allowed_users.split(",") if u.strip()}

    @property
    def agents_by_token(self) -> dict[str, AgentToken]:
        """PLAYBOOK_AGENT_TOKENS parsed: each token with the agent's name and scope."""
        return agent_tokens(self.agent_tokens, self.agent_scope)

    @property
    def agents(self) -> set[str]:
        """PLAYBOOK_AGENT_LOGINS, lower-cased (GitHub logins are case-insensitive)."""
        return {u.strip().lower() for u in self.agent_logins.split(",") if u.strip()}

    @field_validator(
        "prune_schedule",
        "reconcile_schedule",
        "retry_schedule",
        "purge_schedule",
        "agents_md_schedule",
        "rate_backfill_schedule",
        "consolidate_schedule",
        "embed_backfill_schedule",
        "reactions_schedule",
    )
    @classmethod
    def _crontab(cls, value: str, info: ValidationInfo) -> str:
        # pydantic-settings validates defaults too: ours are known good, and every command
        # would otherwise import the scheduler's cron parser for them.
        if info.field_name and value == cls.model_fields[info.field_name].default:
            return value
        from apscheduler.triggers.cron import CronTrigger

        try:
            CronTrigger.from_crontab(value, timezone="UTC")
        except ValueError as error:
            raise ValueError(f"{value!r} is not a crontab expression ({error})") from None
        return value

    @field_validator("agent_scope", "agent_tokens")
    @classmethod
    def _scopes_tickets_can_have(cls, value: str | None, info: ValidationInfo) -> str | None:
        # A scope no ticket key can belong to (MY-PROJ, a/b/c) would silently match nothing.
        scopes = (
            {value}
            if info.field_name == "agent_scope"
            else {agent.scope for agent in agent_tokens(value or "", None).values()}
        )
        for problem in filter(None, map(scope_names.problem, sorted(s for s in scopes if s))):
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _model_capture_needs_a_model(self) -> Settings:
        if self.capture_from_reviews is CaptureFrom.MODEL and not self.model_enabled:
            raise ValueError(
                "PLAYBOOK_CAPTURE_FROM_REVIEWS=model needs a model endpoint: set "
                "PLAYBOOK_MODEL_BASE_URL and PLAYBOOK_MODEL, or use 'heuristic'"
            )
        return self

    @field_validator("model_base_url", "model_name", "model_api_key", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        # `PLAYBOOK_MODEL=` in a .env file means "no model", not a model named "".
        if isinstance(value, str):
            return value.strip() or None
        return value

    @field_validator("model_base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        # The value is never repeated: it may carry a password (https://user:pass@host/v1).
        example = "such as http://localhost:11434/v1"
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        except ValueError:
            raise ValueError(f"must be an http:// or https:// URL {example}") from None
        if parts.scheme.lower() not in ("http", "https"):
            raise ValueError(f"must be an http:// or https:// URL {example}")
        if not parts.hostname:
            raise ValueError(f"has no host; write it whole, {example}")
        return value

    @field_validator("log_level", "log_format", mode="before")
    @classmethod
    def _case_insensitive(cls, value: object, info: ValidationInfo) -> object:
        # People write LOG_LEVEL=debug; accept it rather than fail on case.
        if not isinstance(value, str):
            return value
        return value.upper() if info.field_name == "log_level" else value.lower()
