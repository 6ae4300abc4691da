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


def upgrade() -> None:
    with op.batch_alter_table("bullets") as batch:
        batch.add_column(sa.Column("superseded_by", sa.String(length=64), nullable=True))
        batch.create_index(batch.f("ix_bullets_superseded_by"), ["superseded_by"])
    with op.batch_alter_table("pull_requests") as batch:
        batch.add_column(sa.Column("head_sha", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("merge_commit_sha", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("reverts", sa.String(length=200), nullable=True))
        batch.add_column(sa.Column("reverted_by", sa.String(length=200), nullable=True))
        batch.create_index(batch.f("ix_pull_requests_head_sha"), ["head_sha"])
        batch.create_index(batch.f("ix_pull_requests_merge_commit_sha"), ["merge_commit_sha"])
        batch.create_index(batch.f("ix_pull_requests_reverts"), ["reverts"])
    with op.batch_alter_table("retrievals") as batch:
        batch.add_column(sa.Column("title", sa.Text(), nullable=True))
        batch.add_column(sa.Column("text", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("retrievals") as batch:
        batch.drop_column("text")
        batch.drop_column("title")
    with op.batch_alter_table("pull_requests") as batch:
        batch.drop_index(batch.f("ix_pull_requests_reverts"))
        batch.drop_index(batch.f("ix_pull_requests_merge_commit_sha"))
        batch.drop_index(batch.f("ix_pull_requests_head_sha"))
        batch.drop_column("reverted_by")
        batch.drop_column("reverts")
        batch.drop_column("merge_commit_sha")
        batch.drop_column("head_sha")
    with op.batch_alter_table("bullets") as batch:
        batch.drop_index(batch.f("ix_bullets_superseded_by"))
        batch.drop_column("superseded_by")
