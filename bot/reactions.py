"""Read 👍/👎 on the bot's GitHub lessons comments and keep them as fit verdicts.

GitHub sends no webhook for reactions, so they are read: when the ticket or a PR about it
closes, and by a bounded scheduled sweep of recent comments. In a public repository only
people with write access count; in a private one everyone who can see it; bots and the
bot itself never do.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from bot import claims, metrics, repo_settings
from bot.effects import TicketRef
from bot.github import NotConfigured
from bot.outcomes import LeaseLost, classify, describe
from playbook import clock, db
from playbook.fit import reactions
from playbook.fit.reactions import Due
from playbook.scope_names import is_repository

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)

# The sweep reads comments posted or changed this recently (people react in the first days).
SWEEP_WINDOW = timedelta(days=30)
# Write-access checks one run may make (each is a call; reactions of a public repository's
# crowd would otherwise cost one each). The comment that runs out waits behind the others.
MAX_ACCESS_CHECKS = 200


class OutOfChecks(Exception):
    """The run used its write-access checks; the comment waits behind the others."""


@dataclass
class Reader:
    """One run's reading: what it learnt about repositories and people, asked once each."""

    services: Services
    checks_left: int = field(default_factory=lambda: MAX_ACCESS_CHECKS)
    outcomes: dict[str, int] = field(default_factory=dict)
    _private: dict[str, bool] = field(default_factory=dict)
    _writers: dict[tuple[str, str], bool] = field(default_factory=dict)
    _own: dict[int | None, str | None] = field(default_factory=dict)

    def read(self, comment: Due, ref: TicketRef) -> str:
        """Read one comment's reactions and store its verdicts; returns the outcome.

        ``unchanged`` (GitHub answered 304), ``gone`` (deleted: not read again), ``read``.
        """
        out = self.services.out
        claims.check()
        got = out.comment_reactions(ref, comment.external_id, comment.etag)
        engine = self.services.engine
        if got.status == "unchanged":
            with db.transaction(engine) as session:
                reactions.mark_read(session, comment)
            return self._count("unchanged")
        if got.status == "gone":
            with db.transaction(engine) as session:
                reactions.mark_gone(session, comment)
            log.info("%s: the lessons comment is gone; its reactions are not read again", ref.key)
            return self._count("gone")
        thumbs = [r for r in got.reactions if r.content in reactions.VERDICTS]
        # Only a person's account can be the bot's own (a personal token's): asked then only.
        own = self._own_login(ref) if any(not r.is_bot for r in thumbs) else None
        voted = reactions.votes(thumbs, own)
        if voted and not self._is_private(ref):
            voted = {login: v for login, v in voted.items() if self._may_write(ref, login)}
        cached = repo_settings.cached(engine, ref.repo or "")
        scope = cached.scope if cached is not None else ref.repo
        with db.transaction(engine) as session:
            written = reactions.store(session, comment, voted, etag=got.etag, scope=scope)
        metrics.reaction_read("read", len(voted), len(thumbs) - len(voted))
        self.outcomes["read"] = self.outcomes.get("read", 0) + 1
        if written:
            helpful = sum(1 for v in voted.values() if v)
            log.info(
                "%s: reactions read, %d 👍 and %d 👎 count (%d verdicts written)",
                ref.key,
                helpful,
                len(voted) - helpful,
                written,
            )
        return "read"

    def _count(self, outcome: str) -> str:
        metrics.reaction_read(outcome)
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        return outcome

    def _own_login(self, ref: TicketRef) -> str | None:
        if ref.installation_id not in self._own:
            self._own[ref.installation_id] = self.services.out.own_login(ref)
        return self._own[ref.installation_id]

    def _is_private(self, ref: TicketRef) -> bool:
        repo = ref.repo or ""
        if repo not in self._private:
            self._private[repo] = self.services.out.repository_private(ref)
        return self._private[repo]

    def _may_write(self, ref: TicketRef, login: str) -> bool:
        key = (ref.repo or "", login.lower())
        if key not in self._writers:
            if self.checks_left <= 0:
                raise OutOfChecks(f"{MAX_ACCESS_CHECKS} write-access checks made this run")
            self.checks_left -= 1
            self._writers[key] = self.services.out.can_change_playbook(ref, login)
        return self._writers[key]


def github_ref(ticket_key: str, installation_id: int | None) -> TicketRef | None:
    """The GitHub issue ``owner/repo#N`` names, or None for any other key."""
    repo, hash_, number = ticket_key.rpartition("#")
    if not hash_ or not is_repository(repo) or not number.isdigit():
        return None
    return TicketRef.github(repo, int(number), installation_id)


def read_closed(services: Services, ticket_keys: list[str], installation_id: int | None) -> int:
    """Read the reactions on the lessons comments of tickets that just closed; how many were read.

    Once per closing, and harmless again: an unchanged comment answers 304. A failed read
    costs only the read (the sweep reads the comment later), never what the closing did.
    """
    if services.out.dry_run:
        return 0
    reader = Reader(services)
    read = 0
    for key in dict.fromkeys(ticket_keys):
        ref = github_ref(key, installation_id)
        if ref is None or services.out.missing(ref) is not None:
            continue
        with db.transaction(services.engine) as session:
            comment = reactions.lessons_comment(session, key)
        if comment is None:
            continue
        try:
            reader.read(comment, ref)
        except (NotConfigured, OutOfChecks) as why:
            log.info("%s: reactions not read (%s)", key, why)
            continue
        except LeaseLost:
            raise  # another worker has the delivery: it reads them
        except Exception as error:
            metrics.reaction_read("failed")
            log.warning(
                "%s: reactions not read (%s); the sweep reads them later", key, describe(error)
            )
            continue
        read += 1
    return read


@dataclass(frozen=True)
class SweepReport:
    """What one sweep did: comments by outcome, and why it stopped early (if it did)."""

    outcomes: dict[str, int]
    stopped: str | None = None

    def summary(self) -> str:
        """``3 read, 40 unchanged, 1 gone``, for the log."""
        said = (
            ", ".join(f"{n} {what}" for what, n in sorted(self.outcomes.items())) or "nothing due"
        )
        return f"{said}; stopped: {self.stopped}" if self.stopped else said


def sweep(services: Services, batch: int) -> SweepReport:
    """Read at most ``batch`` recent lessons comments, those read longest ago first.

    Comments unchanged since their last read cost a 304 each, which GitHub does not count
    against the rate limit; a rate limit stops the run (the next one goes on from there).
    """
    reader = Reader(services)
    with db.transaction(services.engine) as session:
        comments = reactions.due(session, clock.now() - SWEEP_WINDOW, batch)
    installations: dict[str, int | None] = dict(repo_settings.known_repos(services.engine))
    stopped = None
    for comment in comments:
        try:
            ref = _ref(services, comment, installations)
            if ref is None:
                _set_aside(services, comment)
                continue
            reader.read(comment, ref)
        except OutOfChecks as why:
            # Behind the others next time: a comment needing more checks than a run makes
            # must not hold up every run.
            _set_aside(services, comment)
            stopped = str(why)
            break
        except Exception as error:
            failure = classify(error)
            metrics.reaction_read("failed")
            if failure.kind == "rate_limited":
                stopped = f"GitHub's rate limit ({failure.reason})"
                break
            # One comment's trouble (a repository gone, the App removed) must not stop the
            # others; it goes to the back of the queue.
            log.warning("%s: reactions not read (%s)", comment.ticket_key, describe(error))
            reader.outcomes["failed"] = reader.outcomes.get("failed", 0) + 1
            _set_aside(services, comment)
    return SweepReport(reader.outcomes, stopped)


def _ref(
    services: Services, comment: Due, installations: dict[str, int | None]
) -> TicketRef | None:
    """Where the comment is, with the installation that can read it (None: nothing can)."""
    ref = github_ref(comment.ticket_key, None)
    if ref is None:
        return None
    repo = ref.repo or ""
    if repo not in installations:
        installations[repo] = None  # asked once per run, found or not
        installations[repo] = repo_settings.installation_for(services, repo)
    ref = github_ref(comment.ticket_key, installations[repo])
    if ref is None or services.out.missing(ref) is not None:
        return None
    return ref


def _set_aside(services: Services, comment: Due) -> None:
    with db.transaction(services.engine) as session:
        reactions.mark_read(session, comment)
