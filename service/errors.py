"""The errors of translating: what a request asked that cannot be served, and why the server
turned one away. They name request fields, never HTTP: the web layer (service/http/errors.py)
gives each its status and body.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from service.runtime.base import RuntimeUnavailable


class RequestError(Exception):
    """A request that is well-formed but that this server cannot serve as asked (limits, pair, an
    option the model lacks): the client's to change. ``field``: the request field at fault;
    ``index``: which item of it, for a list of texts (None for the field as a whole); ``kind``:
    a stable machine-readable name of the problem."""

    def __init__(self, field: str, message: str, index: int | None = None, kind: str = "value_error") -> None:
        super().__init__(message)
        self.field = field
        self.index = index
        self.message = message
        self.kind = kind


class UnsupportedPair(RequestError):
    def __init__(self, source: str, target: str, served: Sequence[str]) -> None:
        sources = {pair.split("-", 1)[0] for pair in served}
        field = "target" if source in sources else "source"
        super().__init__(
            field,
            f"language pair {source}-{target} is not served; served pairs: {', '.join(served)}",
            kind="unsupported_pair",
        )


class TranslationFailed(Exception):
    """The runtime failed; the cause is logged where this is raised, and the client told only that."""


class Rejected(Exception):
    """A request the server turns away whole: the client may retry it, elsewhere or later (after
    ``retry_after`` seconds where given). ``reason`` is a metric label, from a fixed set."""

    reason = "unavailable"

    def __init__(self, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


class NotReady(Rejected):
    """Models are not loaded (loading, failed to load, or shut down)."""

    reason = "not_ready"

    def __init__(self, message: str = "models are not loaded yet; retry shortly", retry_after: int | None = 5) -> None:
        super().__init__(message, retry_after)

    @classmethod
    def of(cls, unavailable: RuntimeUnavailable) -> NotReady:
        """The 503 for a runtime that cannot take batches now: its reason, and when to retry."""
        return cls(unavailable.reason, retry_after=unavailable.retry_after)


class CutOff(Rejected):
    """The drain timeout expired while this request was still being served."""

    reason = "drain_timeout"

    def __init__(self) -> None:
        super().__init__("the server shut down before this translation finished; retry", retry_after=1)


class QueueFull(Rejected):
    reason = "queue_full"


class QueueTimeout(Rejected):
    """The deadline passed before any of the request's texts reached a worker (the server was too
    busy; nothing was computed)."""

    reason = "deadline_in_queue"


class DeadlineExceeded(Rejected):
    """The deadline passed while the model was computing (the only rejection after work began)."""

    reason = "deadline_in_compute"
