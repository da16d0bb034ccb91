"""Request metrics as ASGI middleware: every HTTP request timed and counted by route and status."""

from __future__ import annotations

import time
from collections.abc import Iterable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.metrics import MALFORMED_STATUS, UNMATCHED_ROUTE, Metrics


class MetricsMiddleware:
    """Times every HTTP request, as pure ASGI and outermost, so that it sees the final status of
    every response: error handlers' and other middlewares' included.

    The route label is known before the app runs, so that requests refused by a middleware
    (401, 413, 429) carry their route too. Every route of this service is a static path, so the
    label is the path itself when it is one of ``paths`` (a route with path parameters would
    need its template here); any other path is "unmatched", so that a scanner cannot blow up the
    number of series.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics, paths: Iterable[str]) -> None:
        self.app = app
        self.metrics = metrics
        self.paths = frozenset(paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        route = scope["path"] if scope["path"] in self.paths else UNMATCHED_ROUTE
        status = 500  # what the client gets if the app raises before responding

        async def send_and_record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        if MALFORMED_STATUS in scope:  # answered by the protocol before the app could start
            self.metrics.malformed(scope[MALFORMED_STATUS], route)
            return
        gauge = self.metrics.in_flight.labels(route=route)
        gauge.inc()
        try:
            await self.app(scope, receive, send_and_record_status)
        finally:
            gauge.dec()
            seconds = time.perf_counter() - start
            if MALFORMED_STATUS in scope:  # the body broke while the app waited for it
                self.metrics.malformed(scope[MALFORMED_STATUS], route, seconds)
            else:
                self.metrics.observe(route, status, seconds)
