"""An open consolidation over new active lessons, for the API and page tests of its doors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import Engine

from playbook.consolidation import store
from playbook.consolidation.groups import Group
from playbook.db import transaction
from playbook.lessons import lifecycle


def open_consolidation(
    engine: Engine,
    texts: Sequence[str],
    *,
    scope: str = "global",
    dropped: Mapping[int, list[str]] | None = None,
) -> tuple[int, list[str]]:
    """Add ``texts`` as active lessons and propose them as one group; (its id, member ids).

    ``dropped`` plants flagged terms by member position, as a model's draft would leave them.
    """
    with transaction(engine) as session:
        members = []
        for number, text in enumerate(texts, start=1):
            added = lifecycle.add(
                session, text, learned_from=f"CTMS-{number}", actor="t", scope=scope
            )
            assert added.created, f"{text!r} was taken for a duplicate of {added.bullet.id}"
            members.append(added.bullet.id)
        [proposal] = store.propose(
            session, scope, [Group(member_ids=tuple(members), similarity=0.9)]
        )
        if dropped is not None:
            proposal.dropped_terms = {members[at]: terms for at, terms in dropped.items()}
        return proposal.id, members
