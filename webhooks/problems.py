"""RFC 9457 problem details: the error shape of the agent API, with the field that is wrong."""

from __future__ import annotations

import json
from collections.abc import Mapping

from flask import Response
from pydantic import BaseModel, Field, ValidationError
from werkzeug.http import HTTP_STATUS_CODES

MEDIA_TYPE = "application/problem+json"


class FieldError(BaseModel):
    """One wrong value: where it is and what is wrong with it."""

    field: str = Field(description="The field, e.g. `text`, `query.k` or `body.lesson_ids.0`.")
    message: str


class Problem(BaseModel):
    """An error (RFC 9457): ``detail`` says what to fix, ``field`` names the wrong value."""

    type: str = Field("about:blank", description="A URI naming the kind of problem.")
    title: str = Field(description="The HTTP status's phrase, e.g. Bad Request.")
    status: int = Field(ge=400, le=599)
    detail: str = Field(description="What went wrong and how to fix it, in one sentence.")
    field: str | None = Field(None, description="The first wrong field, when one is to blame.")
    errors: list[FieldError] | None = Field(None, description="Every wrong field, when known.")
    message: str = Field(description="The same as `detail`, for clients of the first version.")


# The documented answer of every error response of the API.
RESPONSE = {
    "description": "An RFC 9457 problem: `detail` says what to fix, `field` names the value.",
    "content": {MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
}


def problem(
    status: int,
    detail: str,
    *,
    field: str | None = None,
    errors: list[FieldError] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """A problem+json response."""
    body = Problem(
        title=HTTP_STATUS_CODES.get(status, "Error"),
        status=status,
        detail=detail,
        message=detail,
        field=field,
        errors=errors,
    )
    response = Response(
        json.dumps(body.model_dump(exclude_none=True)), status=status, mimetype=MEDIA_TYPE
    )
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def from_validation(error: ValidationError) -> Response:
    """A 400 problem for request values that do not fit the documented schema."""
    errors = []
    for item in error.errors(include_url=False, include_input=False)[:20]:
        where = ".".join(str(part) for part in item.get("loc", ())) or "body"
        message = str(item.get("msg", "is invalid"))
        if item.get("type") == "value_error":
            # pydantic prefixes our validators' own sentences ("Value error, '../x' has a
            # '..' segment"): the reader wants the sentence, as the CLI prints it.
            message = message.removeprefix("Value error, ")
        errors.append(FieldError(field=where, message=message[:300]))
    first = errors[0] if errors else FieldError(field="body", message="is invalid")
    return problem(400, f"{first.field}: {first.message}", field=first.field, errors=errors or None)
