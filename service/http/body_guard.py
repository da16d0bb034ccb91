"""Request bodies are checked as they arrive, before anything parses them.

- The content type of a request to a route that takes a body (POST /translate) must be JSON, and the body not compressed: 415 otherwise (a gzip
  body would otherwise reach the JSON parser and be refused as "invalid UTF-8"). The routes of
  LibreTranslate's API (``form_routes``) also take form-urlencoded bodies and none at all, as its
  clients send them.
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


def _is_form(content_type: str) -> bool:
    return content_type.split(";")[0].strip().lower() == "application/x-www-form-urlencoded"


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
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        """``routes``: the (method, path) pairs that take a body; any other request passes
        untouched, so that routing answers it (404 for an unknown path, 405 for a method the
        path lacks) before its content type matters. ``stopping()``: the server is shutting
        down (a cancelled body read is then the drain timeout, answered 503)."""
        self.app = app
        self.form_routes = frozenset(form_routes)
        self.routes = frozenset(routes) | self.form_routes
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.metrics = metrics
        self.stopping = stopping

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (scope["method"], scope["path"]) not in self.routes:
            await self.app(scope, receive, send)
            return
        headers = {name: value for name, value in scope["headers"]}
        refusal = self._check_headers(headers, (scope["method"], scope["path"]) in self.form_routes)
        if refusal is not None:
            status, reason, message = refusal
            self.metrics.rejected(reason)
            await error_response(status, [], message, _CLOSE)(scope, receive, send)
            return
        await self.app(scope, self._guarded(receive), send)

    def _check_headers(self, headers: dict[bytes, bytes], form: bool) -> tuple[int, str, str] | None:
        content_type = headers.get(b"content-type", b"").decode("latin-1")
        if form and (not content_type or _is_form(content_type)):
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
            if int(length) > self.max_bytes:
                return 413, "body_too_large", f"body: at most {self.max_bytes} bytes, Content-Length says {int(length)}"
        return None

    def _guarded(self, receive: Receive) -> Receive:
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
                if received > self.max_bytes:
                    raise BodyRejected(413, "body_too_large", f"body: at most {self.max_bytes} bytes", _CLOSE)
                complete = not message.get("more_body", False)
            else:
                complete = True
            return message

        return guarded_receive
