"""The per-token limit on agents' writes (usage reports, proposals), shared by API and MCP."""

from __future__ import annotations

from sqlalchemy import Engine

from bot.config import Settings
from playbook import rate_limits
from playbook.agents import Caller


class TooManyWrites(Exception):
    """A caller sent more writes this minute than PLAYBOOK_AGENT_WRITES_PER_MINUTE allows."""

    def __init__(self, verdict: rate_limits.Verdict) -> None:
        super().__init__(
            f"rate limit: at most {verdict.limit} usage reports and proposals a minute per "
            f"agent token (PLAYBOOK_AGENT_WRITES_PER_MINUTE); retry in {verdict.retry_after}s"
        )
        self.retry_after = verdict.retry_after


def check(settings: Settings, engine: Engine, caller: Caller) -> None:
    """Count one write of ``caller``; raise TooManyWrites past the limit.

    The maintainer token is not limited: it may approve, deprecate or restore any lesson
    anyway, so a limit on its reports would protect nothing and only slow its backfills.
    """
    limit = settings.agent_writes_per_minute
    if caller.role == "maintainer" or limit <= 0:
        return
    verdict = rate_limits.hit(engine, f"writes:{caller.actor}", limit)
    if not verdict.allowed:
        raise TooManyWrites(verdict)
