"""consolidation proposals and lesson embeddings

`consolidations` holds one proposal per group of overlapping lessons of a scope (members, the
merged draft, what it saves, its decision); `embeddings` holds each lesson's vector by the
configured embedding model with the hash of the text it came from, stamped with the
`embedding_version` counter so every process's vector index reads only what changed.

Revision ID: 0015
Revises: 0014
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "consolidations",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("scope", sa.String(length=200), nullable=False),
        sa.Column("member_ids", sa.JSON(), nullable=False),
        sa.Column("group_key", sa.String(length=64), nullable=False),
        sa.Column("members_hash", sa.String(length=64), nullable=False),
        sa.Column("draft", sa.Text(), nullable=False),
        sa.Column("draft_source", sa.String(length=20), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("dropped_terms", sa.JSON(), nullable=False),
        sa.Column("saves_chars", sa.Integer(), nullable=False),
        sa.Column("similarity", sa.Float(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("merged_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decided_by", sa.String(length=200), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["merged_id"], ["bullets.id"], name=op.f("fk_consolidations_merged_id_bullets")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_consolidations")),
    )
    op.create_index(op.f("ix_consolidations_scope"), "consolidations", ["scope"])
    op.create_index(op.f("ix_consolidations_group_key"), "consolidations", ["group_key"])
    op.create_index(op.f("ix_consolidations_status"), "consolidations", ["status"])
    op.create_table(
        "embeddings",
        sa.Column("bullet_id", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("text_hash", sa.String(length=64), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["bullet_id"], ["bullets.id"], name=op.f("fk_embeddings_bullet_id_bullets")
        ),
        sa.PrimaryKeyConstraint("bullet_id", name=op.f("pk_embeddings")),
    )
    op.create_index(op.f("ix_embeddings_version"), "embeddings", ["version"])
    # The counter always exists, so bumping it is a plain UPDATE (as the playbook version's).
    op.bulk_insert(
        sa.table("playbook_meta", sa.column("key", sa.String), sa.column("value", sa.BigInteger)),
        [{"key": "embedding_version", "value": 0}],
    )


def downgrade() -> None:
    op.execute("DELETE FROM playbook_meta WHERE key = 'embedding_version'")
    op.drop_index(op.f("ix_embeddings_version"), table_name="embeddings")
    op.drop_table("embeddings")
    op.drop_index(op.f("ix_consolidations_status"), table_name="consolidations")
    op.drop_index(op.f("ix_consolidations_group_key"), table_name="consolidations")
    op.drop_index(op.f("ix_consolidations_scope"), table_name="consolidations")
    op.drop_table("consolidations")
