"""reverts, supersession, gaps: what a revert names, the lesson that replaces one, ticket text

`pull_requests` keeps the head and merge commit shas a revert's message can name, the PR a
revert reverts and the revert in force; `bullets.superseded_by` names a superseded lesson's
replacement; `retrievals` keeps the ticket's summary and searched text for the gaps report.

Revision ID: 0013
Revises: 0012
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE, not batch mode: adding and dropping a nullable column is native on
# SQLite (3.35+), and batch mode's table copy cannot drop `bullets` while rows of other
# tables refer to it.
_PULL_COLUMNS = ("head_sha", "merge_commit_sha", "reverts", "reverted_by")
_PULL_INDEXED = ("head_sha", "merge_commit_sha", "reverts")


def upgrade() -> None:
    op.add_column("bullets", sa.Column("superseded_by", sa.String(length=64), nullable=True))
    op.create_index(op.f("ix_bullets_superseded_by"), "bullets", ["superseded_by"])
    for name in _PULL_COLUMNS:
        size = 64 if name.endswith("sha") else 200
        op.add_column("pull_requests", sa.Column(name, sa.String(length=size), nullable=True))
    for name in _PULL_INDEXED:
        op.create_index(op.f(f"ix_pull_requests_{name}"), "pull_requests", [name])
    op.add_column("retrievals", sa.Column("title", sa.Text(), nullable=True))
    op.add_column("retrievals", sa.Column("text", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("retrievals", "text")
    op.drop_column("retrievals", "title")
    for name in _PULL_INDEXED:
        op.drop_index(op.f(f"ix_pull_requests_{name}"), table_name="pull_requests")
    for name in _PULL_COLUMNS:
        op.drop_column("pull_requests", name)
    op.drop_index(op.f("ix_bullets_superseded_by"), table_name="bullets")
    op.drop_column("bullets", "superseded_by")
