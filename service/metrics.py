"""Prometheus metrics.

Each app owns its CollectorRegistry, so several apps in one process (tests, or two servers)
never share or collide on metrics. Every label comes from a bounded set: route templates (not raw
paths), status codes, language pairs, names and backends of the loaded models, and the fixed
rejection reasons below. Nothing a client sends becomes a label, and API keys never do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

# Translation latency spans milliseconds (short text, warm model) to tens of seconds (long batch
# on CPU); the default buckets stop at 10 s.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
QUEUE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
TOKEN_BUCKETS = (16, 64, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
DOCUMENT_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
DOCUMENT_OUTCOMES = ("accepted", "done", "failed")
UNMATCHED_ROUTE = "unmatched"
# Scope key the HTTP protocol sets on a request it answered itself because its body's framing was
# malformed (service/http/protocol.py): the status the client got. The app's own answer went
# nowhere, so the request metrics (service/http/request_metrics.py) count the request with this status instead.
MALFORMED_STATUS = "phrasal.malformed_status"

# Why a request was turned away; pre-declared so that every series exists from the first scrape.
REJECTION_REASONS = (
    "invalid_request",  # 422
    "unauthorized",  # 401
    "rate_limited",  # 429
    "body_too_large",  # 413
    "body_timeout",  # 408
    "header_timeout",  # 408 or closed: no complete request head in time (service/http/header_deadline.py)
    "bad_body",  # 400 (malformed content-length, undecodable body)
    "bad_request",  # 400 (431): not well-formed HTTP: request line, headers, chunked framing (service/http/protocol.py)
    "send_timeout",  # connection aborted: the client stopped reading its response (service/http/protocol.py)
    "unsupported_media_type",  # 415
    "queue_full",  # 503
    "deadline_in_queue",  # 503
    "deadline_in_compute",  # 504
    "not_ready",  # 503
    "overloaded",  # 503: max_connections requests already being served
    "drain_timeout",  # 503: still in flight when the drain timeout expired
    "unavailable",  # 503
    "client_disconnected",  # no response: the client left; its queued work was dropped
)


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        self.request_seconds = Histogram(
            "phrasal_request_duration_seconds",
            "HTTP request latency, by route template and response status.",
            labelnames=("route", "status"),
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.in_flight = Gauge(
            "phrasal_requests_in_flight", "HTTP requests being served now.", labelnames=("route",), registry=registry
        )
        self.queue_seconds = Histogram(
            "phrasal_queue_duration_seconds",
            "Time a text waited for a worker (per text), by language pair and model.",
            labelnames=("pair", "model"),
            buckets=QUEUE_BUCKETS,
            registry=registry,
        )
        self.compute_seconds = Histogram(
            "phrasal_compute_duration_seconds",
            "Time one batch spent in the runtime, by language pair, model and backend.",
            labelnames=("pair", "model", "backend"),
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.batch_size = Histogram(
            "phrasal_batch_size", "Texts per model call.", labelnames=("pair", "model"), buckets=SIZE_BUCKETS, registry=registry
        )
        self.batch_tokens = Histogram(
            "phrasal_batch_tokens",
            "Padded source tokens per model call (texts x longest text).",
            labelnames=("pair", "model"),
            buckets=TOKEN_BUCKETS,
            registry=registry,
        )
        self.segments = Counter(
            "phrasal_translated_segments", "Texts translated by a model.", labelnames=("pair", "model"), registry=registry
        )
        self.source_tokens = Counter(
            "phrasal_source_tokens", "Source tokens read by a model.", labelnames=("pair", "model"), registry=registry
        )
        self.generated_tokens = Counter(
            "phrasal_generated_tokens",
            "Target tokens of the best hypotheses returned (what clients read).",
            labelnames=("pair", "model"),
            registry=registry,
        )
        self.queue_depth = Gauge(
            "phrasal_queue_depth", "Texts waiting for a worker.", labelnames=("pair", "model"), registry=registry
        )
        self.rejections = Counter(
            "phrasal_rejections", "Requests turned away, by reason.", labelnames=("reason",), registry=registry
        )
        for reason in REJECTION_REASONS:
            self.rejections.labels(reason=reason)
        self.cancelled_batches = Counter(
            "phrasal_cancelled_batches",
            "Model calls stopped before their end because no request waited for them any more.",
            labelnames=("pair", "model"),
            registry=registry,
        )
        self.chosen = Counter(
            "phrasal_model_choices",
            'Requests naming no model (or "auto") that their texts sent to this model, of a pair served by '
            "models of several domains (service/domain_routing.py).",
            labelnames=("pair", "model"),
            registry=registry,
        )
        self.memory_hits = Counter(
            "phrasal_memory_segments",
            "Segments answered by a translation memory instead of the model (service/memory.py).",
            labelnames=("pair", "memory"),
            registry=registry,
        )
        self.documents = Counter(
            "phrasal_documents",
            "Documents sent to be translated (LibreTranslate's translate_file, DeepL's v2/document), by outcome: "
            "accepted, done (translated), failed (could not be read or translated).",
            labelnames=("outcome",),
            registry=registry,
        )
        for outcome in DOCUMENT_OUTCOMES:
            self.documents.labels(outcome=outcome)
        self.document_seconds = Histogram(
            "phrasal_document_duration_seconds",
            "Time a worker took to translate a document, from claiming it to storing its translation.",
            buckets=DOCUMENT_BUCKETS,
            registry=registry,
        )
        self.replica_requests = Counter(
            "phrasal_replica_requests",
            "Requests naming a glossary or document this replica does not hold, or listing glossaries, sent on "
            "to the other replicas (service/http/replicas.py), by outcome: held (another replica answered), nowhere "
            "(none holds it), unanswered (a replica could not be asked: 503), merged (a list).",
            labelnames=("outcome",),
            registry=registry,
        )
        for outcome in ("held", "nowhere", "unanswered", "merged"):
            self.replica_requests.labels(outcome=outcome)
        self.documents_waiting = Gauge(
            "phrasal_documents_waiting", "Documents queued or being translated (every process of the server).",
            registry=registry,
        )
        self.ready = Gauge("phrasal_ready", "1 when /health/ready answers 200.", registry=registry)
        self._restarts = _RestartCounter()
        registry.register(self._restarts)
        self.device_memory = Gauge(
            "phrasal_device_memory_bytes",
            "Accelerator memory held by a runtime's device (CUDA only).",
            labelnames=("pair", "model", "backend"),
            registry=registry,
        )

    def observe(self, route: str, status: int, seconds: float) -> None:
        self.request_seconds.labels(route=route, status=str(status)).observe(seconds)

    def rejected(self, reason: str) -> None:
        if reason not in REJECTION_REASONS:
            raise ValueError(f"unknown rejection reason {reason!r}")  # a bug: labels stay bounded
        self.rejections.labels(reason=reason).inc()

    def malformed(self, status: int, route: str = UNMATCHED_ROUTE, seconds: float = 0.0) -> None:
        """A request too malformed for the app, answered by the HTTP protocol itself with `status`."""
        self.rejected("bad_request")
        self.observe(route, status, seconds)

    def watch_restarts(self, pair: str, model: str, read: Callable[[], int | None]) -> None:
        """Export ``read()`` as the inference-process restart count of ``model`` (serving ``pair``) at every scrape."""
        self._restarts.reads[(pair, model)] = read

    def watch_memory(self, pair: str, model: str, backend: str, read: Callable[[], int | None]) -> None:
        """Export ``read()`` at every scrape; call only for a runtime whose ``read()`` is not None."""
        self.device_memory.labels(pair=pair, model=model, backend=backend).set_function(lambda: float(read() or 0))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _RestartCounter(Collector):
    """``phrasal_inference_restarts_total{pair, model}``: a counter the runtimes keep themselves (a child
    process is restarted from a worker thread or a background retry), read at every scrape."""

    def __init__(self) -> None:
        self.reads: dict[tuple[str, str], Callable[[], int | None]] = {}

    def collect(self) -> Iterable[CounterMetricFamily]:
        family = CounterMetricFamily(
            "phrasal_inference_restarts",
            "Starts of an inference process after its first (after a crash, a watchdog kill, or a failed restart).",
            labels=["pair", "model"],
        )
        for (pair, model), read in sorted(self.reads.items()):
            family.add_metric([pair, model], float(read() or 0))
        yield family
