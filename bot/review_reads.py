"""A closed PR's review feedback as GitHub lists it, read through PyGithub (one list per call)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice
from typing import Any

from github.GithubException import GithubException

from playbook import clock
from playbook.reviews import proposals
from playbook.reviews.proposals import CONVERSATION, LINE, REVIEW, Feedback


@dataclass(frozen=True)
class FeedbackRead:
    """One list of a PR's feedback as GitHub answered it, with the PR's author it names."""

    author: str | None
    items: list[Feedback]


def _user(thing: Any) -> tuple[str | None, bool]:
    user = thing.user
    if user is None:  # a deleted account ("ghost"): nobody to trust
        return None, False
    return user.login, proposals.is_bot(user.login, user.type)


def _feedback(kind: str, thing: Any, at: Any) -> Feedback:
    login, bot = _user(thing)
    return Feedback(
        kind=kind,
        login=login,
        is_bot=bot,
        body=proposals.bounded(thing.body),
        url=thing.html_url,
        at=clock.to_utc(at) if at else None,
        # A line comment's file; reviews and conversation comments have none.
        path=_path(thing) if kind == LINE else None,
    )


def _path(comment: Any) -> str | None:
    path = comment.path
    return path if isinstance(path, str) else None


def read_feedback(
    client: Any, repo: str, number: int, kind: str, limit: int, own: str | None = None
) -> FeedbackRead:
    """One kind of feedback on PR ``number`` of ``repo`` through PyGithub, at most ``limit`` items.

    ``own`` is the bot's login when GitHub does not say so by its type (a personal token):
    its comments are marked as a bot's, as an App's are.
    """
    try:
        pull = client.get_repo(repo).get_pull(number)
    except GithubException as error:
        if error.status == 404:  # the PR is gone: no feedback to read (a retry would not help)
            return FeedbackRead(None, [])
        raise
    author = pull.user.login if pull.user is not None else None
    items: Iterable[Feedback]
    if kind == REVIEW:
        reviews = islice(pull.get_reviews(), limit)
        # Only a review that requested changes says what was wrong; its body is the summary.
        items = [
            _feedback(REVIEW, r, r.submitted_at) for r in reviews if r.state == "CHANGES_REQUESTED"
        ]
    elif kind == LINE:
        lines = islice(pull.get_review_comments(), limit)
        items = [_feedback(LINE, c, c.created_at) for c in lines]
    else:
        said = islice(pull.get_issue_comments(), limit)
        items = [_feedback(CONVERSATION, c, c.created_at) for c in said]
    mine = (own or "").lower()
    return FeedbackRead(
        author,
        [
            item if not mine or (item.login or "").lower() != mine else _as_bot(item)
            for item in items
            if item.body.strip()
        ],
    )


def _as_bot(item: Feedback) -> Feedback:
    return Feedback(item.kind, item.login, True, item.body, item.url, item.at, item.path)
