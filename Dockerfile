# playbook-bot: one image for every process. The default command is the web process
# (gunicorn, as in the README's production layout); the same image runs the rest:
#   docker run --env-file .env -p 8080:8080 playbook-bot              # web
#   docker run --env-file .env playbook-bot playbook-bot worker       # worker (and the schedule)
#   docker run --env-file .env playbook-bot playbook-bot db upgrade   # migrate PostgreSQL first
# compose.yaml wires these together with PostgreSQL. No setting or secret is baked in: all
# come from the environment at run time (.env.example lists them).

ARG PYTHON_IMAGE=python:3.12-slim-bookworm

# --- builder: the package with the postgres extra, in a virtualenv copied whole below ---
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# README.md and LICENSE are part of the package's metadata; tests and benches stay out.
COPY pyproject.toml README.md LICENSE ./
COPY playbook ./playbook
COPY bot ./bot
COPY webhooks ./webhooks
# Every dependency ships as a wheel (psycopg[binary] included), so no compiler is needed.
RUN python -m venv /opt/playbook-bot \
    && /opt/playbook-bot/bin/pip install --no-cache-dir ".[postgres]"

# --- runtime: the same slim Python, the virtualenv, and an unprivileged user ---
FROM ${PYTHON_IMAGE}
ENV PATH=/opt/playbook-bot/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# A fixed numeric uid and gid: a mounted volume's owner is predictable, and orchestrators
# that require a non-root user (runAsNonRoot) can tell without a passwd file. Its home is the
# working directory, where the SQLite default (playbook.db) goes when no database is set.
RUN groupadd --system --gid 10001 playbook \
    && useradd --system --no-log-init --uid 10001 --gid playbook \
        --home-dir /var/lib/playbook-bot --create-home playbook \
    && install -d -o playbook -g playbook -m 0700 /var/lib/playbook-bot/data
COPY --from=builder /opt/playbook-bot /opt/playbook-bot
USER 10001:10001
WORKDIR /var/lib/playbook-bot
EXPOSE 8080
# No HEALTHCHECK here: the worker and one-off commands run from this image too and serve no
# HTTP. compose.yaml gives each service its own check.
CMD ["gunicorn", "-c", "python:webhooks.gunicorn_conf", "-w", "3", "--limit-request-line", "8190", "-b", "0.0.0.0:8080", "webhooks.wsgi:app"]
