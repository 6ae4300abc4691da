"""Whose work a ticket is: one rule (``scope_of``), the same in Python and in SQL.

A token scoped to ``acme/api`` must see ``acme/api#3`` and never ``acme/api-internal#3``,
``acme/api.x#3`` or ``acme/apix#3``; a Jira scope ``CTMS`` sees ``CTMS-1`` and never
``CTMS-X-1`` as another project's, nor ``CTMS-1/x#2``. The SQL form (``View.owns``, used by
``View.events`` and the ratings count) must answer every key as ``View.sees_ticket`` does,
on SQLite (whose LIKE ignores case) and PostgreSQL alike.
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st
from sqlalchemy import Engine, String, cast, literal, select
from sqlalchemy.orm import Session

from playbook import db
from playbook.lessons import lifecycle
from playbook.models import UsageEvent
from playbook.outcomes import usage
from playbook.scopes import View, scope_of

OWNER = st.text("abcAB09-", min_size=1, max_size=8)
NAME = st.text("abcAB09-._", min_size=1, max_size=8)
PROJECT = st.text("ABCX09_", min_size=1, max_size=6)
NUMBER = st.integers(0, 10**6).map(str)
# Every character the rule or SQL could trip on: the separators, LIKE's wildcards and escape
# characters, case, white space and a few beyond ASCII (NUL aside: PostgreSQL refuses it).
ODD = st.text("aA/#-%_\\. \u212a\u00e9\U0001f600", max_size=12)


@st.composite
def keys(draw: st.DrawFn) -> str:
    """A ticket or PR key, well formed or not."""
    owner, name, project, number = draw(OWNER), draw(NAME), draw(PROJECT), draw(NUMBER)
    shape = draw(
        st.sampled_from(
            [
                f"{owner}/{name}#{number}",
                f"{owner}/{name}-internal#{number}",
                f"{owner}/{name}.x#{number}",
                f"{owner}/{name}-{number}",
                f"{project}-{number}",
                f"{project}-{name}-{number}",
                f"{project}-{number}/{name}#1",
                f"{owner}/{name}#{number}#{project}",
                f"{owner.upper()}/{name.lower()}#{number}",
                f"{project.lower()}-{number}",
                f"{owner}/{name}/{project}#{number}",
                draw(ODD),
            ]
        )
    )
    return shape + draw(st.sampled_from(["", draw(ODD)]))


@st.composite
def scopes(draw: st.DrawFn) -> str:
    """A scope a token may name, sensible or not."""
    owner, name, project = draw(OWNER), draw(NAME), draw(PROJECT)
    return draw(
        st.sampled_from(
            [f"{owner}/{name}", project, f"{owner}/{name}-internal", f"{project}-X", draw(ODD)]
        )
    )


def sql_owns(engine: Engine, view: View, key: str) -> bool:
    """``view.owns`` evaluated by the database on ``key``."""
    with engine.connect() as connection:
        return bool(connection.scalar(select(view.owns(cast(literal(key), String)))))


def test_a_repository_key_is_its_repositorys_and_a_jira_key_its_projects() -> None:
    assert scope_of("acme/api#3") == "acme/api"
    assert scope_of("acme/api-internal#3") == "acme/api-internal"
    assert scope_of("CTMS-4410") == "CTMS"
    # Nobody's: no number sign or dash, a path, a slash without owner or name, nothing.
    for key in ("CTMS", "acme/api", "a/b/c#1", "#3", "/x#3", "a/#3", "-3", "", None, "x/y-1"):
        assert scope_of(key) is None, key
    api = View(scope="acme/api")
    assert api.sees_ticket("acme/api#3")
    for key in ("acme/api-internal#3", "acme/api-3", "acme/api.x#3", "acme/apix#3", "ACME/API#3"):
        assert not api.sees_ticket(key), key
    ctms = View(scope="CTMS")
    assert ctms.sees_ticket("CTMS-1")
    for key in ("CTMS#1", "CTMS-1/x#2", "CTMSX-1", "ctms-1", "CTMS/a#1"):
        assert not ctms.sees_ticket(key), key
    # A scope no key can name sees no ticket (a Jira key has no dash in its project).
    assert not View(scope="MY-PROJ").sees_ticket("MY-PROJ-1")


@given(owner=OWNER, name=NAME, number=NUMBER, tail=st.sampled_from(["-internal", ".x", "x", "-"]))
def test_a_repository_never_sees_a_repository_whose_name_starts_like_it(
    owner: str, name: str, number: str, tail: str
) -> None:
    view = View(scope=f"{owner}/{name}")
    assert view.sees_ticket(f"{owner}/{name}#{number}")
    assert not view.sees_ticket(f"{owner}/{name}{tail}#{number}")
    assert not view.sees_ticket(f"{owner}/{name}-{number}")


@given(scope=scopes(), key=keys())
@example(scope="acme/api", key="acme/api-internal#3")
@example(scope="acme/api", key="ACME/API#3")
@example(scope="acme/api", key="acme/api#3")
@example(scope="a_b/c", key="aXb/c#1")
@example(scope="a%/c", key="ab/c#1")
@example(scope="CTMS", key="CTMS-1/x#2")
@example(scope="CTMS", key="CTMS-X-1")
@example(scope="CTMS", key="ctms-1")
@example(scope="\u212a/a", key="k/a#1")
def test_sql_and_python_agree_on_every_key(migrated_engine: Engine, scope: str, key: str) -> None:
    view = View(scope=scope)
    assert sql_owns(migrated_engine, view, key) == view.sees_ticket(key)
    assert view.sees_ticket(key) == (scope_of(key) == scope)


def test_a_scopes_usage_view_holds_only_its_own_tickets(engine: Engine) -> None:
    """``View.events`` as the stats, usage and lesson pages run it, on stored rows."""
    tickets = [
        "acme/api#3",
        "acme/api#12",
        "acme/api-internal#3",
        "acme/api-3",
        "acme/api.x#3",
        "ACME/API#4",
        "acme/api%#5",
        "CTMS-1",
        "CTMS-X-1",
        "CTMS-1/acme#2",
        "ctms-2",
    ]
    with db.transaction(engine) as session:
        shared = lifecycle.add(session, "Shared lesson text", learned_from="G-1", actor="t")
        for ticket in tickets:
            usage.record_once(
                session, "loaded", [shared.bullet.id], ticket_key=ticket, consumer="bot"
            )
    with Session(engine) as session:
        for scope in ("acme/api", "CTMS", "acme/api-internal", "acme/api%"):
            view = View(scope=scope)
            seen = session.scalars(select(UsageEvent.ticket_key).where(view.events())).all()
            assert sorted(seen) == sorted(t for t in tickets if view.sees_ticket(t)), scope
    assert View(scope="acme/api").sees_ticket("acme/api#12")
