"""Errors the service raises and how they reach a client.

Every error body is ``{"message": "<one readable line>", "detail": [{field, loc, msg, type}]}``.
A client error names the field at fault; a server error says only that it failed — the cause
and stack trace go to the server log, never to the client (DESIGN §3.10).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from service.schemas import ErrorDetail, ErrorResponse

log = logging.getLogger("service")

Loc = tuple[str | int, ...]


class RequestError(Exception):
    """A request that is well-formed but that this server cannot serve (limits, pair): 422."""

    def __init__(self, loc: Loc, message: str, kind: str = "value_error") -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message
        self.kind = kind


class UnsupportedPair(RequestError):
    def __init__(self, source: str, target: str, served: Sequence[str]) -> None:
        sources = {pair.split("-", 1)[0] for pair in served}
        field = "target" if source in sources else "source"
        super().__init__(
            ("body", field),
            f"language pair {source}-{target} is not served; served pairs: {', '.join(served)}",
            kind="unsupported_pair",
        )


class TranslationFailed(Exception):
    """The runtime failed; the cause is logged where this is raised: 500."""


class NotReady(Exception):
    """Models are not loaded (startup not finished, or shutting down): 503."""


def _field(loc: Sequence[Any], kind: str) -> str:
    # loc starts with where FastAPI found the value ("body"); clients think in field names.
    parts = list(loc[1:]) if loc and loc[0] in ("body", "query", "path") else list(loc)
    if kind == "json_invalid" or not parts:
        return "body"
    return ".".join(str(p) for p in parts)


def _error_response(status: int, details: list[ErrorDetail], message: str | None = None) -> JSONResponse:
    if message is None:
        message = "; ".join(f"{d.field}: {d.msg}" for d in details)
    body = ErrorResponse(message=message, detail=details)
    return JSONResponse(status_code=status, content=body.model_dump())


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    details = [
        ErrorDetail(
            field=_field(err.get("loc", ()), err.get("type", "")),
            loc=[p if isinstance(p, int) else str(p) for p in err.get("loc", ())],
            msg=err.get("msg", "invalid value"),
            type=err.get("type", "value_error"),
        )
        for err in exc.errors()
    ]
    return _error_response(422, details)


async def _request_error(request: Request, exc: RequestError) -> JSONResponse:
    detail = ErrorDetail(field=_field(exc.loc, exc.kind), loc=list(exc.loc), msg=exc.message, type=exc.kind)
    return _error_response(422, [detail])


async def _translation_failed(request: Request, exc: TranslationFailed) -> JSONResponse:
    return _error_response(500, [], "internal error: the translation failed (logged on the server)")


async def _not_ready(request: Request, exc: NotReady) -> JSONResponse:
    return _error_response(503, [], "models are not loaded yet; retry shortly")


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return _error_response(500, [], "internal error (logged on the server)")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(RequestError, _request_error)
    app.add_exception_handler(TranslationFailed, _translation_failed)
    app.add_exception_handler(NotReady, _not_ready)
    app.add_exception_handler(Exception, _unexpected)
