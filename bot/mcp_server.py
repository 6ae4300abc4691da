"""The playbook as an MCP server: search, read, cite and propose lessons, over any transport."""

# No `from __future__ import annotations`: the SDK reads the tools' argument types at runtime,
# and the annotations below refer to limits known only once the settings are.

import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import (
    ResourceError,
    ResourceNotFoundError,
    ToolError,
    UnexpectedToolError,
)
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import Field, ValidationError
from sqlalchemy import Engine, exc
from sqlalchemy.orm import Session

from bot import callers, write_limits
from bot.config import Settings
from playbook import agents, db
from playbook.anchors import fields as anchor_fields
from playbook.errors import BulletNotFound, DatabaseUnavailable, PlaybookError
from playbook.lessons import fields
from playbook.outcomes import usage
from playbook.reviews import batches
from playbook.search.floor import Floor

log = logging.getLogger(__name__)

SERVER_NAME = "playbook"
LESSON_URI = "playbook://lessons/{id}"
GUIDE_URI = "playbook://guide"
DATABASE_DOWN = "the playbook database is unavailable; retry later"

# Who is calling, from the request's context (never from a tool argument).
CallerOf = Callable[[Context], agents.Caller]
T = TypeVar("T")

GUIDE = """\
This server is the team's playbook: short lessons (ids like pb-12) learned from past tickets
and pull requests, ranked for the task at hand.

1. Before you start work on a ticket, call `search_lessons` with the task's text (its summary
   on the first line) and `ticket` set to the ticket key (e.g. CTMS-4410, or owner/repo#12):
   the lessons returned are recorded as loaded for that ticket, and the ticket's scope and
   the global lessons are searched (the answer's `searched` says which). `get_lesson` shows
   one lesson with its history; the resource playbook://lessons/{id} holds the same.
2. Apply the lessons that fit. Cite each one you actually used: list the ids in the pull
   request body (e.g. "Lessons used: pb-12, pb-31"); the bot reads them there, and whether
   the PR merges rates the lessons. For work that has no pull request, call `record_usage`
   with `kind="cited"`, the ticket key and those ids instead.
3. When you learn something a later task should know (a pitfall, a convention, a fix that
   worked), call `propose_lesson` with one short, self-contained lesson and `learned_from` set
   to the ticket key. It stays proposed until a maintainer approves it or the PR merges; a
   near-duplicate of an existing lesson creates nothing and names the existing one instead,
   and one much like an existing lesson names it in `similar_to`.

Tools never approve, edit, deprecate, supersede or restore lessons: maintainers do that, and
only a maintainer's token may call `list_proposals` (the proposals waiting, in batches).
"""


class NotAuthenticated(PlaybookError):
    """A request that reached the server without a token the settings know."""


class PlaybookMCPServer(MCPServer):
    """The SDK's server, with argument errors told in one line an agent can act on."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        """Call a tool; arguments that fail its schema raise ToolError naming each field."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            invalid = error.__cause__
            if isinstance(error, UnexpectedToolError) or not isinstance(invalid, ValidationError):
                raise
            # pydantic's text spans lines and links its docs; the fields and the rules are
            # what the agent needs (the values it sent are its own).
            problems = "; ".join(
                f"{'.'.join(str(part) for part in problem['loc']) or 'arguments'}: {problem['msg']}"
                for problem in invalid.errors()
            )
            raise ToolError(f"invalid arguments for {name}: {problems}") from invalid


def local_caller(settings: Settings) -> CallerOf:
    """The caller of a stdio server: the local user, in PLAYBOOK_AGENT_SCOPE."""
    caller = callers.local(settings)
    return lambda _ctx: caller


def bearer_caller(settings: Settings) -> CallerOf:
    """The caller of an HTTP server: whoever the request's ``Authorization`` header proves."""

    def caller_of(ctx: Context) -> agents.Caller:
        # The HTTP endpoint refuses requests without a valid token before they get here; the
        # header is checked again so that no request reaches the playbook as nobody in
        # particular, whatever the transport in front of this server.
        headers = ctx.headers
        caller = callers.from_authorization(
            settings, headers.get("authorization") if headers is not None else None
        )
        if caller is None:
            raise NotAuthenticated("not authenticated: send Authorization: Bearer <token>")
        return caller

    return caller_of


def build_server(
    settings: Settings, engine_factory: Callable[[], Engine], caller_of: CallerOf
) -> MCPServer:
    """An MCP server whose tools act for ``caller_of(ctx)`` on ``engine_factory()``'s playbook."""
    server = PlaybookMCPServer(
        SERVER_NAME,
        title="Playbook",
        description="Lessons learned from past tickets, for AI coding agents.",
        instructions=GUIDE,
        # Nothing here changes under a client's feet, and a subscription stream would hold an
        # HTTP worker thread open for as long as the client keeps it.
        subscriptions=False,
    )

    def act(ctx: Context, work: Callable[[Session, agents.Caller], T]) -> T:
        """``work`` for the caller in its own transaction; database failures as one sentence."""
        caller = caller_of(ctx)
        try:
            with db.transaction(engine_factory()) as session:
                return work(session, caller)
        except DatabaseUnavailable as error:
            # Its sentence names the setting or command to fix, for the operator reading the
            # log; the agent can only retry.
            log.error("database unavailable: %s", error)
            raise DatabaseUnavailable(DATABASE_DOWN) from None
        except (exc.OperationalError, exc.InterfaceError) as error:
            # The driver's text names the server and the role; a few words of it are enough.
            log.error("database unavailable: %s", db.describe_error(error))
            raise DatabaseUnavailable(DATABASE_DOWN) from None

    def run(ctx: Context, work: Callable[[Session, agents.Caller], T]) -> T:
        """``act`` for a tool: a mistake or an outage is the tool's error, read by the agent."""
        try:
            return act(ctx, work)
        except (PlaybookError, DatabaseUnavailable) as error:
            raise ToolError(str(error)) from None

    def write(ctx: Context, work: Callable[[Session, agents.Caller], T]) -> T:
        """``run`` for a tool that writes: counted against the token's writes a minute."""
        try:
            write_limits.check(settings, engine_factory(), caller_of(ctx))
        except write_limits.TooManyWrites as error:
            # The SDK has no status codes for tools: the sentence says when to retry.
            raise ToolError(str(error)) from None
        except PlaybookError as error:
            raise ToolError(str(error)) from None
        except DatabaseUnavailable as error:
            log.error("database unavailable: %s", error)
            raise ToolError(DATABASE_DOWN) from None
        return run(ctx, work)

    @server.tool(
        title="Search lessons",
        annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True),
    )
    def search_lessons(
        ctx: Context,
        query: Annotated[
            str,
            Field(
                description="The task: the ticket's summary on the first line, then its "
                "description (only the first 500 characters of it are read)."
            ),
        ],
        k: Annotated[
            int,
            Field(
                ge=1,
                le=agents.MAX_K_ASKED,
                description=f"How many lessons to return (at most {agents.MAX_K} are).",
            ),
        ] = 5,
        ticket: Annotated[
            str | None,
            Field(
                description="The ticket key the work is for (e.g. CTMS-4410 or owner/repo#12); "
                "the lessons returned are recorded as loaded for it. In a scope, only that "
                "scope's tickets are accepted."
            ),
        ] = None,
        scope: Annotated[
            str | None,
            Field(
                max_length=fields.SCOPE_CHARS,
                description="Search this scope's lessons and global ones (owner/repo, a Jira "
                "project or global). Without it, a ticket's scope and global are searched, "
                "or, naming neither, every scope you may read; the answer's `searched` says "
                "which.",
            ),
        ] = None,
        min_relevance: Annotated[
            float | None,
            Field(
                ge=0,
                le=1,
                description="Leave out lessons whose estimated chance of fitting the task is "
                "below this (0..1). By default none is: each lesson carries its relevance.",
            ),
        ] = None,
        paths: Annotated[
            list[str] | None,
            Field(
                max_length=anchor_fields.MAX_SEARCH_PATHS,
                description='Files the work is about, e.g. ["orders/locking.py"]: lessons '
                "anchored there rank first.",
            ),
        ] = None,
    ) -> agents.SearchAnswer:
        """Find the lessons that fit a task, ranked as the bot ranks them for a ticket.

        Call it before starting work, with the ticket key, then cite the ids you use.
        """
        return run(
            ctx,
            lambda session, caller: agents.search(
                session,
                caller,
                query,
                k=k,
                ticket=ticket,
                scope=scope,
                max_chars=settings.comment_max_chars,
                experiment=settings.experiment,
                min_relevance=min_relevance,
                floor=Floor.of(settings.min_relevance),
                paths=anchor_fields.check_paths(paths, "paths", anchor_fields.MAX_SEARCH_PATHS)
                or (),
            ),
        )

    @server.tool(title="Get a lesson", annotations=ToolAnnotations(read_only_hint=True))
    def get_lesson(
        ctx: Context,
        id: Annotated[str, Field(description="The lesson id, e.g. pb-12.")],
    ) -> agents.LessonDetail:
        """One lesson with its status, counters, latest revisions and usage events."""
        return run(
            ctx,
            lambda session, caller: agents.get_lesson(
                session, caller, id, min_tickets=settings.effect_min_tickets
            ),
        )

    @server.tool(
        title="Record lessons loaded or cited",
        annotations=ToolAnnotations(read_only_hint=False, idempotent_hint=True),
    )
    def record_usage(
        ctx: Context,
        ticket: Annotated[str, Field(description="The ticket key the work is for.")],
        lesson_ids: Annotated[
            list[str],
            Field(
                max_length=usage.MAX_IDS_PER_EVENT,
                description='The lesson ids, e.g. ["pb-12", "pb-31"].',
            ),
        ],
        kind: Annotated[
            Literal["loaded", "cited"],
            Field(
                description="cited: the lessons were used in the work (list them in the PR "
                "body too); loaded: they were read."
            ),
        ],
    ) -> agents.UsageAnswer:
        """Record that lessons were loaded or cited for a ticket; each counts once per ticket."""
        return write(
            ctx,
            lambda session, caller: agents.record_usage(
                session,
                caller,
                ticket,
                lesson_ids,
                kind,
                credit_replacement=settings.superseded_cites_count_for_replacement,
            ),
        )

    @server.tool(
        title="Propose a lesson",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False),
    )
    def propose_lesson(
        ctx: Context,
        text: Annotated[
            str,
            Field(
                description="One short, self-contained lesson a later task should know "
                f"(at most {settings.max_lesson_chars} characters)."
            ),
        ],
        learned_from: Annotated[
            str, Field(description="The ticket key the lesson was learned on.")
        ],
        tags: Annotated[
            list[str] | None, Field(description='Optional tags, e.g. ["payments"].')
        ] = None,
        paths: Annotated[
            list[str] | None,
            Field(
                description="Optional repository globs the lesson is about, e.g. "
                '["orders/locking.py", "orders/**"] (at most 10, relative, no "..").'
            ),
        ] = None,
        symbols: Annotated[
            list[str] | None,
            Field(description='Optional function or class names, e.g. ["OrderLock.acquire"].'),
        ] = None,
    ) -> agents.ProposeAnswer:
        """Propose a lesson learned (status proposed until approved or its PR merges).

        A near-duplicate of a live lesson creates nothing: ``created`` is false and
        ``duplicate_of`` names the existing lesson. A lesson much like a live one is created,
        and ``similar_to`` names that one, for a maintainer to supersede.
        """
        return write(
            ctx,
            lambda session, caller: agents.propose(
                session,
                caller,
                text,
                learned_from,
                tags=tags,
                max_chars=settings.max_lesson_chars,
                paths=paths,
                symbols=symbols,
            ),
        )

    @server.tool(
        title="List proposals (maintainers)", annotations=ToolAnnotations(read_only_hint=True)
    )
    def list_proposals(ctx: Context) -> batches.ProposalBatches:
        """Proposed lessons waiting for a maintainer, newest batch first (maintainer token only).

        The review proposals of one PR are one batch with the PR's key and link; every other
        proposal is a batch of its own. An agent token gets an error: agents propose, not review.
        """
        return run(ctx, batches.listing)

    @server.resource(
        LESSON_URI,
        name="lesson",
        title="A playbook lesson",
        description="A lesson with its counters, revisions and usage events (as get_lesson).",
        mime_type="application/json",
    )
    def lesson_resource(id: str, ctx: Context) -> str:
        """A lesson as JSON, in the caller's scope."""
        try:
            detail = act(
                ctx,
                lambda session, caller: agents.get_lesson(
                    session, caller, id, min_tickets=settings.effect_min_tickets
                ),
            )
        except BulletNotFound as error:
            raise ResourceNotFoundError(str(error)) from None
        except (PlaybookError, DatabaseUnavailable) as error:
            # Resources report failures as protocol errors carrying this message.
            raise ResourceError(str(error)) from None
        return detail.model_dump_json()

    @server.resource(
        GUIDE_URI,
        name="guide",
        title="How to use the playbook",
        mime_type="text/markdown",
    )
    def guide() -> str:
        """How an agent uses the playbook's tools."""
        return GUIDE

    @server.prompt(title="Use the playbook")
    def use_playbook(
        task: Annotated[
            str | None, Field(description="The task or ticket you are about to work on.")
        ] = None,
    ) -> str:
        """How to use the playbook for a task: search first, cite what you used, propose."""
        if not task:
            return GUIDE
        return (
            f"You are about to work on this task:\n\n{task}\n\n"
            "Start by calling `search_lessons` with the task's text and its ticket key, "
            f"then follow the playbook's rules:\n\n{GUIDE}"
        )

    return server
