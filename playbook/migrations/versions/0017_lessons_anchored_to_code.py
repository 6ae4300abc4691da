"""lessons anchored to code

`bullets.paths` and `bullets.symbols` anchor a lesson to the globs and names it is about;
`stale_since`, `stale_detail` and `stale_pr` flag one whose anchored code a merged PR changed;
`rule_file_syncs.files` keeps the path-scoped rule files the sync writes beside its block.

Revision ID: 0017
Revises: 0016
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ALTER TABLE: a batch would rebuild `bullets` on SQLite, which the foreign keys of
    # other tables forbid.
    op.add_column("bullets", sa.Column("paths", sa.JSON(), nullable=True))
    op.add_column("bullets", sa.Column("symbols", sa.JSON(), nullable=True))
    op.add_column("bullets", sa.Column("stale_since", sa.DateTime(timezone=True), nullable=True))
    op.add_column("bullets", sa.Column("stale_detail", sa.Text(), nullable=True))
    op.add_column("bullets", sa.Column("stale_pr", sa.String(length=200), nullable=True))
    op.create_index(op.f("ix_bullets_stale_since"), "bullets", ["stale_since"])
    op.add_column("rule_file_syncs", sa.Column("files", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("rule_file_syncs", "files")
    op.drop_index(op.f("ix_bullets_stale_since"), table_name="bullets")
    op.drop_column("bullets", "stale_pr")
    op.drop_column("bullets", "stale_detail")
    op.drop_column("bullets", "stale_since")
    op.drop_column("bullets", "symbols")
    op.drop_column("bullets", "paths")
