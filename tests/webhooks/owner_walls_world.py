"""The world the owner-wall walk runs in: an attacker's scope, its victims' rows, the checks.

The attacker holds a token scoped to ``evil/app``. Its victims: ``victim/secret`` (another
owner), the Jira project ``CTMS`` and ``evil/app-internal`` (a repository whose name starts
like the attacker's). Each victim has lessons in every status, usage, a rating, searches
forming a gap, a holdout arm and a consolidation proposal (see ``build``).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field

from sqlalchemy import Engine, LargeBinary, select, update

from playbook import agents, clock, db
from playbook.consolidation import store as consolidations
from playbook.consolidation.groups import Group
from playbook.experiment import holdout
from playbook.lessons import lifecycle
from playbook.models import Base, Bullet, Rating
from playbook.outcomes import usage

ATTACKER = "evil/app"
TOKEN = "walk-evil-app-token"
MAINTAINER = "walk-maintainer-token"
SALT = "walk-experiment-salt"
# Another owner, a Jira project, and a repository whose name starts with the attacker's.
VICTIMS = ("victim/secret", "CTMS", "evil/app-internal")
OWN_TICKET = "evil/app#9"
QUERY = "payroll database password rotation ledger export"
# Words only the victims' rows hold: texts, reasons, gap tickets' summaries, their agent.
WORDS = ("VICTIMWORD", "VICTIMREASON", "ZUGZWANG", "agent:victim")
# Columns of free text: a row is a victim's by its ids, tickets and scope, not by words
# (an attacker may write a lesson that mentions a victim's id; that is its own lesson).
FREE_TEXT_COLUMNS = {
    "text",
    "title",
    "body",
    "draft",
    "reason",
    "demoted_reason",
    "detail",
    "payload",
    "last_error",
    "last_traceback",
    "before",
    "after",
    "headers",
    "paused_reason",
    "last_result",
    "dropped_terms",
    "tags",
}
# Request fields of free text: naming a victim's id in them is the caller's own words.
FREE_TEXT_FIELDS = {"text", "query", "q", "reason", "tags", "phase", "consumer", "task", "cursor"}
# Opaque strings of the caller's own (a search's id it echoes back): no scope's key.
FREE_TEXT_FIELDS |= {"queryId", "query_id"}
# Paths in the caller's own repository and names in its code (`victim/secret` is a folder
# name there): anchors, never another scope's key.
FREE_TEXT_FIELDS |= {"paths", "symbols"}
MISSING_ID = "pb-99999"
MISSING_CONSOLIDATION = "99999"
# Routes outside the OpenAPI document that the walk does not call with the token: the MCP
# endpoint is walked by an MCP client below.
NOT_PLAIN_ROUTES = {"/mcp"}
# Reads that record: a search with a ticket loads its lessons for it. Every other GET only
# reads (and a GET that wrote a victim's row would fail the row check anyway).
RECORDING_READS = {("GET", "/api/v1/search")}


def ticket(scope: str, number: int) -> str:
    """A ticket key of ``scope``: owner/repo#N or PROJ-N."""
    return f"{scope}#{number}" if "/" in scope else f"{scope}-{number}"


@dataclass
class World:
    """The playbook walked: the attacker's lesson, a global one, and the victims' rows."""

    own: str
    shared: str
    ids: dict[str, list[str]] = field(default_factory=dict)  # victim scope: its lesson ids
    tickets: dict[str, list[str]] = field(default_factory=dict)  # victim scope: its tickets
    consolidations: list[int] = field(default_factory=list)

    @property
    def victim_ids(self) -> list[str]:
        """Every victim lesson id."""
        return [i for ids in self.ids.values() for i in ids]

    @property
    def victim_tickets(self) -> list[str]:
        """Every victim ticket key."""
        return [t for tickets in self.tickets.values() for t in tickets]

    def values(self) -> list[str]:
        """What the walk puts in each string argument: a scope, a ticket, two ids of each."""
        found: list[str] = []
        for scope in VICTIMS:
            found += [scope, self.tickets[scope][0], self.ids[scope][0], self.ids[scope][3]]
        return found

    def missing(self, value: str) -> str | None:
        """The same kind of value naming nothing: for answers that must not tell them apart."""
        if value in self.victim_ids:
            return MISSING_ID
        if value in {str(i) for i in self.consolidations}:
            return MISSING_CONSOLIDATION
        for scope in VICTIMS:
            if value in self.tickets[scope]:
                return ticket(scope, 99999)
        return None

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        """``key_pattern``, built once the world is (it is read after every call)."""
        return self.key_pattern()

    def key_pattern(self) -> re.Pattern[str]:
        """Ids, tickets and scope names of the victims, as whole words."""
        ids = "|".join(re.escape(i) for i in self.victim_ids)
        # CTMS-4410 is the example the MCP guide and error messages give for any Jira key.
        scopes = "|".join(
            re.escape(s) + (r"(?!-4410(?!\d))" if "/" not in s else "") for s in VICTIMS
        )
        return re.compile(rf"(?<![\w-])(?:{ids})(?!\d)|(?<![\w./-])(?:{scopes})(?![\w.])")

    def leaks(self, answer: str, request: str) -> list[str]:
        """The victims' ids, tickets, scopes and words in ``answer`` the request did not name."""
        found = [m.group(0) for m in self.pattern.finditer(answer)]
        found += [w for w in WORDS if w.lower() in answer.lower()]
        return sorted({f for f in found if f.lower() not in request.lower()})


def build(engine: Engine) -> World:
    """The attacker's lesson and gap, a global lesson, and in each victim scope: lessons in
    every status, usage of its own and the global lesson, a rating, searches that form a gap,
    an experiment arm, a consolidation proposal."""
    maintainer = agents.Caller(actor="walk-maintainer", role="maintainer")

    with db.transaction(engine) as session:

        def add(text: str, scope: str, learned_from: str, status: str = "active") -> str:
            result = lifecycle.add(
                session, text, learned_from=learned_from, actor="t", scope=scope, status=status
            )
            assert result.created, text
            return result.bullet.id

        shared = add(
            "Retry Stripe webhooks with the event id as the idempotency key", "global", "G-1"
        )
        own = add(
            "Pin the chromium version of the payroll PDF renderer in CI", ATTACKER, "evil/app#1"
        )
        # Victim ids from pb-500 on: never pb-12 or pb-31, the examples of the docs and errors.
        session.execute(update(Bullet).where(Bullet.id == own).values(number=499))
        usage.record_once(session, "loaded", [shared], ticket_key="evil/app#2", consumer="bot")
        world = World(own=own, shared=shared)
        for n, scope in enumerate(VICTIMS):
            t = [
                ticket(scope, 41 + n),
                ticket(scope, 42 + n),
                *(ticket(scope, 51 + i) for i in range(3)),
            ]
            world.tickets[scope] = t
            active = add(
                f"Rotate the payroll database password monthly VICTIMWORD{n}a", scope, t[0]
            )
            other = add(f"Ledger exports VICTIMWORD{n}b wait for the nightly close", scope, t[0])
            proposed = add(f"VICTIMWORD{n}c payroll secrets live in vault", scope, t[1], "proposed")
            deprecated = add(f"VICTIMWORD{n}d keep the payroll password in env", scope, t[1])
            replaced = add(f"VICTIMWORD{n}e rotate database credentials by hand", scope, t[1])
            lifecycle.deprecate(
                session,
                deprecated,
                reason=f"VICTIMREASON leaked the payroll DB password ({scope})",
                actor="t",
            )
            lifecycle.supersede(session, replaced, active, actor="t", reason="VICTIMREASON merged")
            world.ids[scope] = [active, other, proposed, deprecated, replaced]
            usage.record_once(
                session,
                "cited",
                [active],
                ticket_key=t[0],
                consumer="agent:victim",
                source="agent:victim",
                success=True,
            )
            # The global lesson in the victim's work: its ticket and agent stay the victim's.
            usage.record_once(
                session,
                "loaded",
                [shared],
                ticket_key=t[1],
                consumer="agent:victim",
                source="agent:victim",
            )
            session.add(
                Rating(
                    bullet_id=shared,
                    ticket_key=t[1],
                    pr_key=ticket("victim/secret", 70 + n),
                    score=-1.0,
                    reason="VICTIMREASON went against it",
                    model="m",
                    prompt_version="1",
                    rated_at=clock.now(),
                )
            )
            (proposal,) = consolidations.propose(
                session, scope, [Group(member_ids=(active, other), similarity=0.9)]
            )
            world.consolidations.append(proposal.id)
    with db.transaction(engine) as session:
        for scope in VICTIMS:
            # Three tickets no lesson fits, alike: a gap of the victim's.
            for key in world.tickets[scope][2:]:
                agents.search(
                    session,
                    maintainer,
                    f"ZUGZWANG quarterly reconciliation stalls in the overnight batch {key}",
                    ticket=key,
                )
            # An arm of the holdout for the victim's first ticket.
            agents.search(
                session,
                maintainer,
                QUERY,
                ticket=world.tickets[scope][0],
                experiment=holdout.Config(percent=50, salt=SALT),
            )
        # The attacker's own gap: its answers must still show it.
        for number in (5, 6, 7):
            agents.search(
                session,
                maintainer,
                f"Login redirect loops after the session cookie expires, case {number}",
                ticket=ticket(ATTACKER, number),
            )
    return world


def victim_rows(engine: Engine, world: World) -> set[str]:
    """Every row, in every table, whose ids, tickets or scope are a victim's, as JSON."""
    pattern = world.pattern
    rows: set[str] = set()
    with engine.connect() as connection:
        for table in Base.metadata.sorted_tables:
            # Binary columns (the search index's snapshot, a salt) name no scope.
            columns = [c for c in table.columns if not isinstance(c.type, LargeBinary)]
            for row in connection.execute(select(*columns)).mappings():
                keys = {k: v for k, v in row.items() if k not in FREE_TEXT_COLUMNS}
                if pattern.search(json.dumps(keys, default=str)):
                    rows.add(f"{table.name} {json.dumps(dict(row), default=str, sort_keys=True)}")
    return rows
