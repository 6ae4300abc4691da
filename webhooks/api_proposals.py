"""GET /api/v1/proposals: pending proposals in batches, a PR's review proposals together."""

from __future__ import annotations

from flask import Response, g

from playbook import agents, db
from playbook.errors import PlaybookError
from playbook.reviews import batches
from webhooks import api as v1
from webhooks import api_parts, problems
from webhooks.runtime import runtime

api = api_parts.sibling("api_proposals", __name__, v1.api)
# An agent token's 403 is answered as every lesson route answers it.
api.errorhandler(PlaybookError)(v1._domain_problem)


@api.get(
    "/proposals",
    tags=[v1.maintain_tag],
    summary="Proposals waiting for a maintainer, in batches",
    responses={200: batches.ProposalBatches, 403: problems.RESPONSE},
)
def proposals() -> Response:
    """Proposed lessons (maintainer token), newest batch first: the review proposals of one PR
    are one batch with the PR's key and link; every other proposal is a batch of its own.

    The same batches as /ui/proposals and the MCP tool list_proposals; an agent token gets 403.
    """
    caller: agents.Caller = g.caller
    with db.transaction(runtime().engine) as session:
        answer = batches.listing(session, caller)
    return Response(answer.model_dump_json(), mimetype="application/json")
