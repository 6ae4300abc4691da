"""repository settings and rule-file syncs: each repository's settings file, its AGENTS.md PR

`repo_settings` keeps each repository's `.github/playbook-bot.yml` (and its organisation's
defaults) as last read: the blob shas, the last good values, the problems; `rule_file_syncs`
the managed block the bot keeps in a repository's rule file and its one pull request.

Revision ID: 0012
Revises: 0011
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import playbook.models

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIME = playbook.models.UTCDateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "repo_settings",
        sa.Column("repo", sa.String(length=200), nullable=False),
        sa.Column("installation_id", sa.BigInteger(), nullable=True),
        sa.Column("repo_sha", sa.String(length=64), nullable=True),
        sa.Column("org_sha", sa.String(length=64), nullable=True),
        sa.Column("repo_values", sa.JSON(), nullable=True),
        sa.Column("org_values", sa.JSON(), nullable=True),
        sa.Column("problems", sa.JSON(), nullable=False),
        sa.Column("read_at", _TIME, nullable=True),
        sa.Column("tried_at", _TIME, nullable=True),
        sa.Column("stale", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("repo", name=op.f("pk_repo_settings")),
    )
    op.create_table(
        "rule_file_syncs",
        sa.Column("repo", sa.String(length=200), nullable=False),
        sa.Column("path", sa.String(length=200), nullable=False),
        sa.Column("pull_number", sa.Integer(), nullable=True),
        sa.Column("pull_url", sa.Text(), nullable=True),
        sa.Column("block_sha", sa.String(length=64), nullable=True),
        sa.Column("lesson_ids", sa.JSON(), nullable=False),
        sa.Column("paused_until", _TIME, nullable=True),
        sa.Column("paused_reason", sa.Text(), nullable=True),
        sa.Column("synced_at", _TIME, nullable=True),
        sa.Column("last_result", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("repo", name=op.f("pk_rule_file_syncs")),
    )


def downgrade() -> None:
    op.drop_table("rule_file_syncs")
    op.drop_table("repo_settings")
