"""How errors reach a client: the status and body of each (domain errors: service/errors.py).

Every error body is ``{"message": "<one readable line>", "detail": [{field, loc, msg, type}]}``.
A client error names the field at fault; a server error says only that it failed — the cause
and stack trace go to the server log, never to the client (docs/design.md §3.10).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from service.errors import DeadlineExceeded, Rejected, RequestError, TranslationFailed
from service.metrics import MALFORMED_STATUS
from service.schemas import ErrorDetail, ErrorResponse

log = logging.getLogger("service")

# A 422 answers with at most this many problems, and quotes at most this many characters of any
# field name the client made up, so that the answer (built on the event loop, while every other
# request waits) stays small whatever the body holds: a 1 MiB body can name 80,000 unknown keys,
# or one key of 1 MB.
MAX_DETAILS = 10
MAX_QUOTED_CHARS = 64
# request.state key: the client sent its texts as one string, not a list, so an error about a
# text names the field alone ("text"), not an item of it ("text.0").
ONE_TEXT = "one_text"


class BodyRejected(HTTPException):
    """The body guard's 408/413 raised while the app reads the body. A FastAPI HTTPException
    because FastAPI lets those through its body parsing (anything else becomes its 400)."""

    def __init__(self, status: int, reason: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(status_code=status, detail=message, headers=headers)
        self.reason = reason


class ClientDisconnected(Exception):
    """The client went away while its request waited; nobody reads the answer (499)."""


def rejected_status(exc: Rejected) -> int:
    """504 when the deadline passed during the computation, 503 for every other rejection."""
    return 504 if isinstance(exc, DeadlineExceeded) else 503


def _quoted(part: str | int) -> str | int:
    if isinstance(part, str) and len(part) > MAX_QUOTED_CHARS:
        return part[:MAX_QUOTED_CHARS] + "..."
    return part


def _field(loc: Sequence[Any], kind: str) -> str:
    # loc starts with where FastAPI found the value ("body"); clients think in field names.
    parts = list(loc[1:]) if loc and loc[0] in ("body", "query", "path") else list(loc)
    if kind == "json_invalid" or not parts:
        return "body"
    return ".".join(str(_quoted(p)) for p in parts)


def _error_json(content: Any) -> bytes:
    # ASCII: an error may quote what the client sent (a field name, a language code), and a lone
    # surrogate in it must come back escaped, not crash the encoder into a 500.
    return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


class ErrorJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return _error_json(content)


# The header of an answer saying this replica does not hold the glossary or document a request names:
# service/http/replicas.py sends such a request on to the other replicas.
NOT_HELD = "x-phrasal-not-held"


def error_body(message: str) -> bytes:
    """An error body without field details, byte for byte as the app renders one: for the answers
    the HTTP protocol writes itself, below the app (service/http/header_deadline.py, service/http/protocol.py)."""
    return _error_json({"message": message, "detail": []})


def error_response(
    status: int, details: list[ErrorDetail], message: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    if message is None:
        message = "; ".join(f"{d.field}: {d.msg}" for d in details)
    body = ErrorResponse(message=message, detail=details)
    return ErrorJSONResponse(status_code=status, content=body.model_dump(), headers=headers)


def _count(request: Request, reason: str) -> None:
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None:
        metrics.rejected(reason)


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = exc.errors()
    syntax = next((err for err in errors if err.get("type") == "json_invalid"), None)
    if syntax is not None:
        # Not JSON at all: the body is bad (400, like undecodable bytes), not a field (422).
        _count(request, "bad_body")
        return error_response(400, [], _json_syntax_message(syntax))
    details = [
        ErrorDetail(
            field=_field(err.get("loc", ()), err.get("type", "")),
            loc=[p if isinstance(p, int) else _quoted(str(p)) for p in err.get("loc", ())],
            msg=err.get("msg", "invalid value"),
            type=err.get("type", "value_error"),
        )
        for err in errors[:MAX_DETAILS]
    ]
    message = "; ".join(f"{d.field}: {d.msg}" for d in details)
    if len(errors) > MAX_DETAILS:
        message += f"; and {len(errors) - MAX_DETAILS} more problems"
    _count(request, "invalid_request")
    return error_response(422, details, message)


def request_loc(request: Request, exc: RequestError) -> list[str | int]:
    """Where in the body the error's field is, as FastAPI's own 422s say it."""
    one_text = getattr(request.state, ONE_TEXT, False)
    return ["body", exc.field] if exc.index is None or one_text else ["body", exc.field, exc.index]


async def _request_error(request: Request, exc: RequestError) -> JSONResponse:
    loc = request_loc(request, exc)
    detail = ErrorDetail(field=_field(loc, exc.kind), loc=loc, msg=exc.message, type=exc.kind)
    if exc.kind == "unknown_glossary":
        if getattr(request.app.state, "replicas", None) is None:
            _count(request, "invalid_request")  # else another replica may hold it, and service/http/replicas.py counts
        return error_response(422, [detail], headers={NOT_HELD: "glossary"})
    _count(request, "invalid_request")
    return error_response(422, [detail])


async def _translation_failed(request: Request, exc: TranslationFailed) -> JSONResponse:
    return error_response(500, [], "internal error: the translation failed (logged on the server)")


async def _rejected(request: Request, exc: Rejected) -> JSONResponse:
    _count(request, exc.reason)
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else None
    return error_response(rejected_status(exc), [], exc.message, headers)


# FastAPI's own 400, for a body json.loads could not take (invalid UTF-8, nesting too deep).
_FASTAPI_BODY_ERROR = "There was an error parsing the body"


async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    # 404, 405, 400 and the body guard's 408/413: the same body shape as every other error.
    message = exc.detail if isinstance(exc.detail, str) else "request refused"
    if isinstance(exc, BodyRejected):
        _count(request, exc.reason)
    elif exc.status_code == 400 and isinstance(exc.__cause__, ClientDisconnect):
        # FastAPI's 400 for a client that left half-way through its body: nobody reads an
        # answer, and the body was not bad.
        return await _client_disconnected(request, ClientDisconnected())
    elif exc.status_code == 400:
        _count(request, "bad_body")
        if message == _FASTAPI_BODY_ERROR:
            message = _unparseable(exc.__cause__)
    return error_response(exc.status_code, [], message, dict(exc.headers) if exc.headers else None)


def _json_syntax_message(error: dict[str, Any]) -> str:
    loc = error.get("loc", ())
    where = f" at character {loc[1]}" if len(loc) > 1 and isinstance(loc[1], int) else ""
    reason = (error.get("ctx") or {}).get("error")
    return f"body: not parseable as JSON ({reason}{where})" if reason else f"body: not parseable as JSON (syntax error{where})"


def _unparseable(cause: BaseException | None) -> str:
    """The message of FastAPI's 400 for a body ``json.loads`` raised ``cause`` on."""
    if isinstance(cause, ValueError) and "integer string conversion" in str(cause):
        # Python parses at most 4300 digits into an int (sys.get_int_max_str_digits).
        return "body: not parseable as JSON (a number has too many digits)"
    return "body: not parseable as JSON (invalid UTF-8, or nested too deep)"


async def _client_disconnected(request: Request, exc: ClientDisconnected) -> Response:
    if MALFORMED_STATUS not in request.scope:  # else the protocol answered it (and it is counted so)
        _count(request, "client_disconnected")
    return Response(status_code=499)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, [], "internal error (logged on the server)")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(RequestError, _request_error)
    app.add_exception_handler(TranslationFailed, _translation_failed)
    app.add_exception_handler(Rejected, _rejected)
    app.add_exception_handler(ClientDisconnected, _client_disconnected)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
