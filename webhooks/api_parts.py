"""The /api/v1 blueprints' common frame: prefix, bearer security, error responses, checks."""

from __future__ import annotations

from flask import Response, request
from flask_openapi3 import APIBlueprint

from webhooks import problems

# The query parameters that are lists, one item a time (`paths=a&paths=b`: GET /search's).
LIST_PARAMETERS = frozenset({"paths"})
_NAME_CHARS = 100


def blueprint(name: str, import_name: str) -> APIBlueprint:
    """An /api/v1 blueprint: bearer-token security and problem+json errors in its OpenAPI."""
    return APIBlueprint(
        name,
        import_name,
        url_prefix="/api/v1",
        abp_security=[{"bearer": []}],
        abp_responses={
            "400": problems.RESPONSE,
            "401": problems.RESPONSE,
            "default": problems.RESPONSE,
        },
    )


def sibling(name: str, import_name: str, main: APIBlueprint) -> APIBlueprint:
    """A further /api/v1 blueprint that runs the checks of ``main``'s routes first.

    The main blueprint's checks (a known token, JSON bodies) are copied, not re-declared,
    so a route in a module of its own can never skip one.
    """
    part = blueprint(name, import_name)
    for check in main.before_request_funcs.get(None, []):
        part.before_request(check)
    return part


def once_each() -> Response | None:
    """A 400 naming a query parameter that is no list and is given more than once.

    Flask would read the first ``ticket`` of ``ticket=a&ticket=b`` and drop the others
    silently: a search for a ticket the caller did not mean.
    """
    for name in request.args:
        count = len(request.args.getlist(name))
        if count > 1 and name not in LIST_PARAMETERS:
            shown = name[:_NAME_CHARS]
            return problems.problem(400, f"give {shown!a} once, not {count} times", field=shown)
    return None
