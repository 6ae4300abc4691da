"""The /api/v1 blueprints' common frame: prefix, bearer security, error responses, checks."""

from __future__ import annotations

from flask_openapi3 import APIBlueprint

from webhooks import problems


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
