"""Comments: `/lesson` and `/playbook` commands, and bullet ids cited in PR discussions."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from bot import lesson_anchors, payloads, repo_settings
from bot.effects import JiraCommentSeen, TicketRef
from bot.handlers.context import Ignored, effect, publish
from bot.handlers.router import Event, Router
from bot.jira import JiraAuthor, author_of
from bot.render import _lesson_text, _wiki_text  # the lessons comment's escapes, reused
from playbook import clock, db
from playbook.deliveries import comments
from playbook.errors import PlaybookError
from playbook.experiment import outcomes as experiment_outcomes
from playbook.fit import labels, verdicts
from playbook.lessons import lifecycle, reach
from playbook.lessons.capture import FIT_VERBS, Command, commands_in
from playbook.lessons.markdown import markdown_text
from playbook.outcomes import tracking
from playbook.outcomes.evidence import cite_later, scope_of
from playbook.repos import syncs

if TYPE_CHECKING:
    from bot.services import Services

log = logging.getLogger(__name__)
router = Router()
# A reply repeats a verdict's reason this far: enough to see what was kept, not a soapbox.
REPLY_REASON_CHARS = 200


def run_commands(
    services: Services,
    ref: TicketRef,
    user: str | JiraAuthor,
    commands: list[Command],
    learned_from: str,
    scope: str,
    source_url: str | None,
    comment_id: str,
    place: reach.Place,
    anchors: Callable[[], list[str] | None] | None = None,
) -> None:
    """Carry out a comment's commands if its author may change the playbook, and reply once.

    Who may is decided from the verified author (GitHub's permission API, or the Jira
    comment as Jira's API returns it), never from what a payload says about itself; what
    they may change is ``place``'s lessons and the global ones (`reach.reachable`).
    ``anchors`` gives the globs a `/lesson` is anchored to (a PR's files): asked once, and
    only when someone allowed wrote a `/lesson`.
    """
    purpose = comments.reply_purpose(comment_id)
    with db.transaction(services.engine) as session:
        answered = comments.find(session, ref.target, ref.key, purpose)
    if answered is not None and answered.state == "posted":
        raise Ignored(f"comment {comment_id} was answered already")
    checked, allowed = effect(
        services, ref, "check_permission", lambda: services.out.can_change_playbook(ref, user)
    )
    if not checked:
        raise Ignored("the commenter's permission cannot be checked: the client is not configured")
    if isinstance(user, JiraAuthor):
        name, actor = user.display, user.account_id or user.name or user.display
    else:
        name, actor = f"@{user}", user
    if not allowed:
        where = (
            "write access to this repository"
            if ref.target == "github"
            else "a place in PLAYBOOK_JIRA_ALLOWED_USERS (or the Jira permission it names)"
        )
        reply = (
            f"Thanks {name}! Only people with {where} can change the playbook, so nothing "
            "was changed. A maintainer can repeat the command."
        )
    else:
        # Anchors given in the command win: the PR's files are read only for one without.
        lessons = any(
            command.verb == "lesson" and not command.problem and command.paths is None
            for command in commands
        )
        paths = anchors() if anchors is not None and lessons else None
        reply = "\n".join(
            _apply(
                services, ref, command, str(actor), learned_from, scope, source_url, place, paths
            )
            for command in commands
        )
    publish(services, ref, purpose, reply, edit=False)


def _apply(
    services: Services,
    ref: TicketRef,
    command: Command,
    author: str,
    learned_from: str,
    scope: str,
    source_url: str | None,
    place: reach.Place,
    paths: list[str] | None = None,
) -> str:
    if command.problem:
        return f"Could not read that command: {command.problem}."
    actor = f"{author} (comment)"
    # Only the user's mistakes become the reply; a database outage propagates, so the
    # delivery is retried and nothing is posted about it.
    try:
        with db.transaction(services.engine) as session:
            if command.verb == "lesson":
                result = lifecycle.add(
                    session,
                    command.text,
                    learned_from=learned_from,
                    actor=actor,
                    scope=place.scope_for_new(scope),
                    source="comment",
                    source_url=source_url,
                    paths=command.paths if command.paths is not None else paths,
                )
                if not result.created:
                    return f"{result.bullet.id} already says this; nothing added."
                captured = f"Captured {result.bullet.id}, learned from {learned_from}."
                if result.similar is not None:
                    # The people who may supersede are the ones who may write this command.
                    old, new = result.similar.id, result.bullet.id
                    captured += (
                        f" It is much like {old}; if it replaces it: "
                        f"`/playbook supersede {old} by {new}`."
                    )
                return captured
            # Out of this place's reach is answered as a missing id: nothing of another
            # owner's lessons (that it exists, its status) is told here.
            bullet_id = reach.reachable(session, place, command.bullet_id or "").id
            if command.verb in FIT_VERBS:
                # The scope the ticket is searched in: the place's own (for a repository, the
                # one its settings file names), whose fit estimate the verdict calibrates.
                verdict = labels.Verdict(
                    ref.key,
                    bullet_id,
                    command.verb == "helpful",
                    labels.COMMAND,
                    ref.target,
                    author,
                    command.reason,
                    place.home,
                )
                return _noted(verdicts.note(session, verdict), ref.target)
            if command.verb == "supersede":
                reach.reachable(session, place, command.by or "", field="by")
            if command.verb == "approve":
                change = lifecycle.approve(session, bullet_id, actor=actor, reason=command.reason)
            elif command.verb == "deprecate":
                change = lifecycle.deprecate(
                    session,
                    bullet_id,
                    reason=command.reason or f"deprecated by {author}",
                    actor=actor,
                )
            elif command.verb == "supersede":
                change = lifecycle.supersede(
                    session, bullet_id, command.by or "", actor=actor, reason=command.reason
                )
                if not change.changed:
                    return f"{bullet_id} is already superseded by {command.by}; nothing changed."
                return f"{bullet_id} is now superseded by {command.by}."
            else:
                change = lifecycle.restore(session, bullet_id, actor=actor, reason=command.reason)
            if not change.changed:
                return f"{bullet_id} is already {change.bullet.status}; nothing changed."
            return f"{bullet_id} is now {change.bullet.status}."
    except PlaybookError as problem:
        return f"Nothing changed: {problem}."


def _noted(noted: verdicts.Noted, target: str) -> str:
    """One line on a verdict taken: what was kept, and that it moves the scope's fit estimate,
    never the lesson. The reason and the scope are outside text, shown inert in ``target``'s
    markup as lesson text is: no mention, link, image or HTML."""
    escape = _wiki_text if target == "jira" else markdown_text
    fit = "fitted this ticket" if noted.helpful else "did not fit this ticket"
    said = f' ("{_lesson_text(noted.reason, escape, REPLY_REASON_CHARS)}")' if noted.reason else ""
    head = "Noted, replacing your earlier verdict" if noted.replaced else "Noted"
    scope = escape(noted.scope)
    if noted.shown:
        effect = f"It counts toward the fit estimate for {scope}"
    else:
        # Nothing to calibrate against: no estimate was shown for it here (a typo'd id?).
        effect = (
            "The bot's comment here did not show it with an estimate, so it is kept without "
            f"changing the fit estimate for {scope}"
        )
    return f"{head}: {noted.bullet_id} {fit}{said}. {effect}; the lesson itself is unchanged."


@router.register("github", "issue_comment", "created")
def github_comment(event: Event, services: Services) -> None:
    """Commands in an issue or PR comment; on a PR, bullet ids are cites."""
    data = payloads.IssueCommentEvent.model_validate(event.payload)
    repo = data.repository.full_name
    ref = TicketRef.github(repo, data.issue.number, event.installation_id)
    author = data.comment.user
    if author is None or author.type == "Bot":
        raise Ignored("a comment by a bot")  # our own replies, and other bots
    learned_from, ticket = ref.key, None
    cited = 0
    if data.issue.pull_request is not None:
        with db.transaction(services.engine) as session:
            tickets = tracking.tickets_of(session, ref.key)
            # The bot's AGENTS.md sync PR names lessons without having used them: no cites.
            if not syncs.is_sync_number(session, repo, data.issue.number):
                cited = cite_later(
                    session,
                    ref.key,
                    data.comment.body,
                    "comment",
                    credit_replacement=services.settings.superseded_cites_count_for_replacement,
                )
        if tickets:
            learned_from = ticket = tickets[0]
    found = commands_in(data.comment.body)
    if not found:
        if cited:
            return
        raise Ignored("no /lesson or /playbook command in the comment")
    # Read only now: most comments hold no command. The settings file may name the scope.
    own = repo_settings.effective(services, repo, event.installation_id).scope
    scope = scope_of(ticket, own) if ticket else own
    run_commands(
        services,
        ref,
        author.login,
        found,
        learned_from,
        scope,
        data.comment.html_url,
        str(data.comment.id),
        reach.Place.github(repo, own),
        # On a PR, a lesson is about the files it changes; an issue has none.
        (lambda: lesson_anchors.of_pull(services, ref))
        if data.issue.pull_request is not None
        else None,
    )


@router.register("github", "pull_request_review", "submitted")
@router.register("github", "pull_request_review_comment", "created")
def github_review(event: Event, services: Services) -> None:
    """Bullet ids in review bodies and review comments are cites; a review requesting
    changes is a review round of the PR's experiment tickets."""
    data = payloads.ReviewEvent.model_validate(event.payload)
    key = f"{data.repository.full_name}#{data.pull_request.number}"
    body = (data.review or data.comment or payloads.ReviewBody()).body
    review = data.review if event.name == "pull_request_review" else None
    with db.transaction(services.engine) as session:
        sync_pr = syncs.is_sync_number(session, data.repository.full_name, data.pull_request.number)
        credit = services.settings.superseded_cites_count_for_replacement
        cited = (
            0 if sync_pr else cite_later(session, key, body, "review", credit_replacement=credit)
        )
        requested = counted = False
        if review is not None and review.id is not None and review.state:
            requested = review.state.lower() == experiment_outcomes.CHANGES_REQUESTED
            # A payload without its time: the delivery is handled moments after it.
            at = clock.to_utc(review.submitted_at) if review.submitted_at else clock.now()
            counted = experiment_outcomes.record_review(session, review.id, key, review.state, at)
        if requested:
            # Recomputed from the stored reviews, so a redelivered review changes nothing.
            experiment_outcomes.refresh(session, tracking.tickets_of(session, key))
    if cited or counted:
        return
    if requested:
        raise Ignored("the review's request for changes was counted already; no lesson id in it")
    raise Ignored("no known lesson id in the review")


@router.register("jira", "comment_created")
def jira_comment(event: Event, services: Services) -> None:
    """Commands in a Jira comment, read back from Jira so author and text are Jira's."""
    data = payloads.JiraCommentEvent.model_validate(event.payload)
    if not commands_in(data.comment.body):
        raise Ignored("no /lesson or /playbook command in the comment")
    key = data.issue.key
    ref = TicketRef.jira(key)
    raw_author = (event.payload.get("comment") or {}).get("author")
    claimed = JiraCommentSeen(
        author_of(raw_author if isinstance(raw_author, dict) else None), data.comment.body
    )
    checked, seen = effect(
        services,
        ref,
        "read_comment",
        lambda: services.out.jira_comment(ref, data.comment.id, claimed),
    )
    if not checked:
        raise Ignored("Jira is not configured, so the comment's author cannot be verified")
    if seen is None:
        raise Ignored(
            f"Jira has no comment {data.comment.id} on {key}; nothing verified, nothing done"
        )
    found = commands_in(seen.body)
    if not found:
        raise Ignored("the comment in Jira has no command (edited since?)")
    run_commands(
        services,
        ref,
        seen.author,
        found,
        key,
        data.issue.project,
        f"{services.settings.jira_url or ''}/browse/{key}?focusedCommentId={data.comment.id}"
        if services.settings.jira_url
        else None,
        data.comment.id,
        reach.Place.jira(key),
    )
