"""side effects keep the comment text, its slot, lessons and installation

Revision ID: 0006
Revises: 0005
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # All nullable: older rows never stored a comment's text, and most effects are not comments.
    with op.batch_alter_table('side_effects', schema=None) as batch_op:
        batch_op.add_column(sa.Column('body', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('purpose', sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column('bullet_ids', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('installation_id', sa.BigInteger(), nullable=True))
        batch_op.create_index('ix_side_effects_ticket_purpose', ['ticket_key', 'purpose'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('side_effects', schema=None) as batch_op:
        batch_op.drop_index('ix_side_effects_ticket_purpose')
        batch_op.drop_column('installation_id')
        batch_op.drop_column('bullet_ids')
        batch_op.drop_column('purpose')
        batch_op.drop_column('body')
