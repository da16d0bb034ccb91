"""API keys and per-key rate limits, off unless ``api_keys`` is set.

A key comes in the ``api_key_header`` header (default ``X-API-Key``) or as
``Authorization: Bearer <key>`` (what Prometheus and most HTTP clients can send). Every route but
the health checks needs one: 401 without it or with a wrong one, before the route or the body is
looked at. Keys are compared in constant time: the presented key is hashed, and its SHA-256 is
compared with every configured key's, all of them, whatever matches. Only a key's NAME (from
settings) ever reaches a log line; no key, name or hash becomes a metric label.

Rate limit: a token bucket per key name (``rate_limit_burst`` requests at once, refilled at
``rate_limit_per_s``); an empty bucket answers 429 with the seconds until the next token in
``Retry-After``.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import time
from collections.abc import Awaitable, Callable, Mapping

from pydantic import SecretStr
from starlette.types import ASGIApp, Receive, Scope, Send

from service.http.errors import error_response
from service.metrics import Metrics

# Whether a request is one another replica sent on, charged where it arrived (service/http/replicas.py)
SentOn = Callable[[Scope], Awaitable[bool]]

LIBRETRANSLATE_PREFIX = "/libretranslate"
# DeepL's clients send their key as `Authorization: DeepL-Auth-Key KEY`: its routes check it themselves.
DEEPL_PREFIX = "/deepl"

# The health checks stay open: load balancers and orchestrators probe without credentials. So does
# the page (static, no data): it asks the user for a key and sends it with each translation.
OPEN_PATHS = frozenset({"/", "/health", "/health/live", "/health/ready"})


def _digest(key: bytes) -> bytes:
    return hashlib.sha256(key).digest()


class KeyRing:
    def __init__(self, keys: Mapping[str, SecretStr]) -> None:
        self._digests = [(name, _digest(key.get_secret_value().encode("utf-8"))) for name, key in keys.items()]

    def identify(self, presented: bytes) -> str | None:
        """The name of the key ``presented`` is, or None. Constant time in the key's content."""
        given = _digest(presented)
        found = None
        for name, digest in self._digests:
            if hmac.compare_digest(given, digest) and found is None:
                found = name
        return found


class TokenBucket:
    """Per-name token buckets; ``take`` answers 0 (go) or the seconds until a token is due."""

    def __init__(self, rate_per_s: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate_per_s
        self.burst = burst
        self.clock = clock
        self._state: dict[str, tuple[float, float]] = {}  # name -> (tokens, when)

    def take(self, name: str) -> float:
        now = self.clock()
        tokens, then = self._state.get(name, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.rate)
        if tokens >= 1.0:
            self._state[name] = (tokens - 1.0, now)
            return 0.0
        self._state[name] = (tokens, now)
        return (1.0 - tokens) / self.rate


def _presented_key(scope: Scope, header: bytes) -> bytes | None:
    bearer = None
    for name, value in scope["headers"]:
        if name == header:
            return value
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            bearer = value[7:].strip()
    return bearer


class ApiKeyMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        keys: Mapping[str, SecretStr],
        header: str,
        metrics: Metrics,
        buckets: TokenBucket | None = None,
        sent_on: SentOn | None = None,
    ) -> None:
        self.app = app
        self.ring = KeyRing(keys)
        self.header = header.lower().encode("latin-1")
        self.header_name = header
        self.metrics = metrics
        self.buckets = buckets
        self.sent_on = sent_on

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # CORS preflights (OPTIONS) carry no credentials by design; the CORS middleware outside
        # this one answers them.
        # LibreTranslate's and DeepL's clients send their key their own way: their routes check it
        # themselves (service/http/libretranslate.py, deepl.py), with this middleware's keys and buckets.
        if (scope["type"] != "http" or scope["path"] in OPEN_PATHS or scope["method"] == "OPTIONS"
                or scope["path"].startswith((LIBRETRANSLATE_PREFIX + "/", DEEPL_PREFIX + "/"))):
            await self.app(scope, receive, send)
            return
        presented = _presented_key(scope, self.header)
        name = self.ring.identify(presented) if presented else None
        if name is None:
            self.metrics.rejected("unauthorized")
            message = f"missing or invalid API key: send it in the {self.header_name} header"
            response = error_response(401, [], message, {"WWW-Authenticate": f'ApiKey header="{self.header_name}"'})
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})["api_key_name"] = name  # for logs; never the key
        if self.buckets is not None and not (self.sent_on is not None and await self.sent_on(scope)):
            wait = self.buckets.take(name)
            if wait > 0:
                self.metrics.rejected("rate_limited")
                retry = max(1, math.ceil(wait))
                response = error_response(
                    429,
                    [],
                    f"rate limit of {self.buckets.rate:g} requests/s for this key exceeded; retry in {retry} s",
                    {"Retry-After": str(retry)},
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
