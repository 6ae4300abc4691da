"""Alembic environment: runs migrations on the engine handed over by playbook.db."""

from alembic import context

from playbook.models import Base

engine = context.config.attributes["engine"]

with engine.begin() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        # SQLite cannot ALTER most things; batch mode copies the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    context.run_migrations()
