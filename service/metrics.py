"""Prometheus metrics: request latency by route and status.

Each app owns its CollectorRegistry, so several apps in one process (tests, or two servers)
never share or collide on metrics.
"""

from __future__ import annotations

import time

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Translation latency spans milliseconds (short text, warm model) to tens of seconds (long batch
# on CPU); the default buckets stop at 10 s.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
UNMATCHED_ROUTE = "unmatched"


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.request_seconds = Histogram(
            "phrasal_request_duration_seconds",
            "HTTP request latency, by route template and response status.",
            labelnames=("route", "status"),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )

    def observe(self, route: str, status: int, seconds: float) -> None:
        self.request_seconds.labels(route=route, status=str(status)).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Times every HTTP request, as pure ASGI so that it sees the final status of every response,
    error handlers' included.

    The route label is the route template ("/translate"), never the raw path: unknown paths
    share one label so that a scanner cannot blow up the number of series.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500  # what the client gets if the app raises before responding

        async def send_and_record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_record_status)
        finally:
            # The router writes the matched route into the shared scope dict.
            route = getattr(scope.get("route"), "path", None) or UNMATCHED_ROUTE
            self.metrics.observe(route, status, time.perf_counter() - start)
