"""lesson text made visible: stored bullets lose direction overrides and invisible characters

Rows written before `playbook.lessons.characters.visible` guarded every door keep what they were given;
this applies the same rule to them, so the API, MCP and CLI answer what comments and /ui show.
A changed bullet is stamped with a new playbook version, so search indexes read it again.

Revision ID: 0008
Revises: 0007
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from playbook.lessons.characters import visible

revision: str = '0008'
down_revision: str | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TEXT = ('text', 'section', 'scope', 'learned_from', 'source', 'demoted_reason')
_BATCH = 1000


def _cleaned(row: sa.Row) -> dict[str, object]:
    """The values of a row that `visible` changes, made visible; empty ones are kept."""
    changes: dict[str, object] = {}
    for column in _TEXT:
        value = getattr(row, column)
        if isinstance(value, str) and (shown := visible(value).strip()) and shown != value:
            changes[column] = shown
    tags = row.tags
    if isinstance(tags, list) and all(isinstance(tag, str) for tag in tags):
        shown_tags = list(dict.fromkeys(t for t in (visible(tag).strip() for tag in tags) if t))
        if shown_tags != tags:
            changes['tags'] = shown_tags
    return changes


def upgrade() -> None:
    connection = op.get_bind()
    bullets = sa.table(
        'bullets',
        sa.column('id', sa.String),
        sa.column('tags', sa.JSON),
        sa.column('version', sa.Integer),
        *(sa.column(column, sa.Text) for column in _TEXT),
    )
    meta = sa.table('playbook_meta', sa.column('key', sa.String), sa.column('value', sa.Integer))
    updates: list[dict[str, object]] = []
    after = ''
    while True:
        rows = connection.execute(
            sa.select(bullets).where(bullets.c.id > after).order_by(bullets.c.id).limit(_BATCH)
        ).all()
        if not rows:
            break
        after = rows[-1].id
        updates.extend({'id': row.id, **changes} for row in rows if (changes := _cleaned(row)))
    if not updates:
        return
    connection.execute(
        meta.update().where(meta.c.key == 'version').values(value=meta.c.value + 1)
    )
    version = connection.execute(
        sa.select(meta.c.value).where(meta.c.key == 'version')
    ).scalar_one()
    for changes in updates:
        bullet_id = changes.pop('id')
        connection.execute(
            bullets.update().where(bullets.c.id == bullet_id).values(**changes, version=version)
        )


def downgrade() -> None:
    # The characters dropped said nothing a reader could see; there is nothing to put back.
    pass
