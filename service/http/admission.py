"""A bound on the requests being served at once (``max_connections``): beyond it, 503 at once.

Why not uvicorn's ``limit_concurrency``: it refuses every request while that many CONNECTIONS
are open, idle ones included, and uvicorn never closes a connection that has sent nothing: one
client holding ``limit`` silent sockets would make every request (/health/ready too) a bare 503
for as long as it likes, and a burst of more connections than the limit, all open before the
first request is read, would be refused whole, not served up to the limit. Counted here instead: requests the app is serving, so idle sockets cost nothing, the
first ``limit`` requests of a burst are served, and each refusal carries ``Retry-After`` and
is counted (reason ``overloaded``) like every other.

Health checks and /metrics are never refused: probes and scrapes must see an overloaded server
as live and ready (the queue, not the prober, decides what gets served).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from service.http.errors import error_response
from service.metrics import Metrics

EXEMPT_PATHS = frozenset({"/health", "/health/live", "/health/ready", "/metrics"})


class AdmissionMiddleware:
    def __init__(self, app: ASGIApp, *, limit: int, retry_after_s: int, metrics: Metrics) -> None:
        self.app = app
        self.limit = limit
        self.retry_after_s = retry_after_s
        self.metrics = metrics
        self.serving = 0  # requests inside the app now (one event loop: no lock needed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        if self.serving >= self.limit:
            self.metrics.rejected("overloaded")
            message = f"server busy: {self.serving} requests in progress (limit {self.limit}); retry later"
            await error_response(503, [], message, {"Retry-After": str(self.retry_after_s)})(scope, receive, send)
            return
        self.serving += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.serving -= 1
