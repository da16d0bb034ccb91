"""Request bodies are checked as they arrive, before anything parses them.

- The content type of a request to a route that takes a body (POST /translate) must be JSON, and the body not compressed: 415 otherwise (a gzip
  body would otherwise reach the JSON parser and be refused as "invalid UTF-8"). The routes of
  LibreTranslate's API (``form_routes``) also take form-urlencoded bodies and none at all, as its
  clients send them.
  The routes that take a document (``upload_routes``: LibreTranslate's translate_file, DeepL's
  v2/document) take multipart/form-data, and up to ``max_upload_bytes``; the form routes take it too.
- ``Content-Length`` above ``max_body_bytes``: 413 at once, without reading a byte.
- A body sent without a length (chunked) or longer than it said: counted as it streams, 413
  as soon as the count passes the limit; nothing larger is ever buffered.
- The whole body must arrive within ``body_timeout_s`` of the first read: 408 otherwise, so a
  client trickling bytes (slowloris) cannot hold a connection and a task forever.
- ``Content-Length`` and ``Transfer-Encoding`` together: 400. h11 frames such a body by the
  chunks and would keep the connection open; a proxy in front that frames it by the length
  would then see a different next request on it (request smuggling, RFC 9112 section 6.1).
- A body still arriving when the drain timeout after SIGTERM expires: 503 with Retry-After
  (reason ``drain_timeout``, as for a translation cut off), not uvicorn's bare 500 and a
  traceback for the cancellation.

The 408/413 raised while the app reads the body are ``BodyRejected`` (an HTTPException that
FastAPI passes through), answered by the app's error handlers; each closes the connection,
since the rest of the body is never read.
"""

from __future__ import annotations

import asyncio
import email.message
from collections.abc import Callable, Iterable

from starlette.routing import compile_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.errors import CutOff
from service.http.errors import BodyRejected, error_response
from service.metrics import Metrics

_CLOSE = {"Connection": "close"}


def _is_json(content_type: str) -> bool:
    message = email.message.Message()
    message["content-type"] = content_type
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


def _is_form(content_type: str, multipart: bool) -> bool:
    kind = content_type.split(";")[0].strip().lower()
    return kind == "application/x-www-form-urlencoded" or (multipart and kind == "multipart/form-data")


class _Routes:
    """(method, path) pairs, a path possibly a template ("/v2/document/{document_id}")."""

    def __init__(self, routes: Iterable[tuple[str, str]]) -> None:
        routes = set(routes)
        self.exact = {(method, path) for method, path in routes if "{" not in path}
        self.templates = [(method, compile_path(path)[0]) for method, path in routes if "{" in path]  # as routing does

    def __contains__(self, route: tuple[str, str]) -> bool:
        method, path = route
        return route in self.exact or any(m == method and p.match(path) for m, p in self.templates)


class BodyGuardMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_bytes: int,
        timeout_s: float,
        metrics: Metrics,
        routes: Iterable[tuple[str, str]],
        form_routes: Iterable[tuple[str, str]] = (),
        upload_routes: Iterable[tuple[str, str]] = (),
        max_upload_bytes: int = 0,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        """``routes``: the (method, path) pairs that take a body; any other request passes
        untouched, so that routing answers it (404 for an unknown path, 405 for a method the
        path lacks) before its content type matters. ``stopping()``: the server is shutting
        down (a cancelled body read is then the drain timeout, answered 503)."""
        self.app = app
        self.form_routes = _Routes(set(form_routes) | set(upload_routes))
        self.upload_routes = _Routes(upload_routes)
        self.routes = _Routes(set(routes) | set(form_routes) | set(upload_routes))
        self.max_bytes = max_bytes
        self.max_upload_bytes = max(max_upload_bytes, max_bytes)
        self.timeout_s = timeout_s
        self.metrics = metrics
        self.stopping = stopping

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (scope["method"], scope["path"]) not in self.routes:
            await self.app(scope, receive, send)
            return
        headers = {name: value for name, value in scope["headers"]}
        route = (scope["method"], scope["path"])
        limit = self.max_upload_bytes if route in self.upload_routes else self.max_bytes
        refusal = self._check_headers(headers, route in self.form_routes, limit)
        if refusal is not None:
            status, reason, message = refusal
            self.metrics.rejected(reason)
            await error_response(status, [], message, _CLOSE)(scope, receive, send)
            return
        await self.app(scope, self._guarded(receive, limit), send)

    def _check_headers(self, headers: dict[bytes, bytes], form: bool, limit: int) -> tuple[int, str, str] | None:
        content_type = headers.get(b"content-type", b"").decode("latin-1")
        if form and (not content_type or _is_form(content_type, multipart=True)):
            pass
        elif not _is_json(content_type):
            shown = content_type[:60] or "none"
            return 415, "unsupported_media_type", f"body: content type must be application/json, got {shown}"
        encoding = headers.get(b"content-encoding", b"").decode("latin-1").strip().lower()
        if encoding not in ("", "identity"):
            return (
                415,
                "unsupported_media_type",
                f"body: Content-Encoding {encoding[:30]} is not supported; send the body uncompressed",
            )
        length = headers.get(b"content-length")
        if length is not None and b"transfer-encoding" in headers:
            return 400, "bad_body", "body: Content-Length and Transfer-Encoding must not both be set"
        if length is not None:
            if not length.isdigit():
                return 400, "bad_body", "body: Content-Length must be a non-negative integer"
            if int(length) > limit:
                return 413, "body_too_large", f"body: at most {limit} bytes, Content-Length says {int(length)}"
        return None

    def _guarded(self, receive: Receive, limit: int) -> Receive:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        received = 0
        complete = False

        async def guarded_receive() -> Message:
            nonlocal received, complete
            if complete:  # after the body: disconnect notices, which may take any time
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0))
            except asyncio.TimeoutError:
                raise BodyRejected(
                    408, "body_timeout", f"body: not received within {self.timeout_s:g} s", _CLOSE
                ) from None
            except asyncio.CancelledError:
                if not self.stopping():
                    raise
                # uvicorn cancels what is still in flight when the drain timeout expires.
                cut = CutOff()
                raise BodyRejected(
                    503, cut.reason, cut.message, {"Retry-After": str(cut.retry_after), **_CLOSE}
                ) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyRejected(413, "body_too_large", f"body: at most {limit} bytes", _CLOSE)
                complete = not message.get("more_body", False)
            else:
                complete = True
            return message

        return guarded_receive
