"""deliveries keep their ticket: the key told once when a delivery is received

`deliveries.ticket_key` holds the ticket a delivery is about (``PB-12``, ``owner/repo#12``),
told by `playbook.deliveries.tickets.ticket_key` when the receiver stores it; the worker's
lanes and the deliveries page read it instead of each parsing the payload their own way.
Rows stored before are told here from their stored payloads; one that cannot be parsed
keeps none, as the receiver would have refused it.

Revision ID: 0009
Revises: 0008
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from playbook.deliveries.tickets import ticket_key

revision: str = '0009'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BATCH = 500


def _told(source: str, payload: str) -> str | None:
    try:
        parsed = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    return ticket_key(source, parsed)


def upgrade() -> None:
    op.add_column('deliveries', sa.Column('ticket_key', sa.String(length=200), nullable=True))
    connection = op.get_bind()
    deliveries = sa.table(
        'deliveries',
        sa.column('id', sa.BigInteger),
        sa.column('source', sa.String),
        sa.column('payload', sa.Text),
        sa.column('ticket_key', sa.String),
    )
    after = 0
    while True:
        rows = connection.execute(
            sa.select(deliveries.c.id, deliveries.c.source, deliveries.c.payload)
            .where(deliveries.c.id > after)
            .order_by(deliveries.c.id)
            .limit(_BATCH)
        ).all()
        if not rows:
            break
        after = rows[-1].id
        for row in rows:
            key = _told(row.source, row.payload)
            if key is not None:
                connection.execute(
                    deliveries.update().where(deliveries.c.id == row.id).values(ticket_key=key)
                )


def downgrade() -> None:
    with op.batch_alter_table('deliveries') as batch_op:
        batch_op.drop_column('ticket_key')
