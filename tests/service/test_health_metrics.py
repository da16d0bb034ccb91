"""GET /health and GET /metrics."""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from service.app import create_app
from testing.fake_runtime import FakeRuntime
from tests.service.support import serving


def samples(client) -> dict[tuple[str, str, str], float]:
    """(sample name, route, status) -> value, for the latency histogram."""
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(response.text):
        if family.name == "phrasal_request_duration_seconds":
            for sample in family.samples:
                if "le" not in sample.labels:
                    out[(sample.name, sample.labels["route"], sample.labels["status"])] = sample.value
    return out


def test_health_lists_the_pairs(settings):
    runtimes = [FakeRuntime("en", "fr"), FakeRuntime("en", "de")]
    with serving(create_app(settings, runtime_factory=lambda s: runtimes)) as client:
        response = client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "phase": "ready", "pairs": ["en-de", "en-fr"]}


def test_health_is_503_until_models_are_loaded(settings, runtime):
    app = create_app(settings, runtime_factory=lambda s: [runtime])
    client = TestClient(app)  # used without "with": the lifespan (model loading) has not run
    response = client.get("/health")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "phase": "loading", "pairs": [], "reason": "loading models"}
    with serving(app) as loaded:
        assert loaded.get("/health").status_code == 200
    # After shutdown the runtimes are closed and the service is unavailable again.
    assert runtime.closed
    assert client.get("/health").json() == {"status": "unavailable", "phase": "stopped", "pairs": [], "reason": "stopped"}


def test_metrics_count_requests_by_route_and_status(client, translate):
    for _ in range(3):
        assert translate(text="a b").status_code == 200
    assert translate(text="a", beam_size=0).status_code == 422
    assert client.get("/health").status_code == 200
    assert client.get("/no/such/path").status_code == 404
    observed = samples(client)
    counts = {key[1:]: value for key, value in observed.items() if key[0].endswith("_count")}
    assert counts == {
        ("/translate", "200"): 3.0,
        ("/translate", "422"): 1.0,
        ("/health", "200"): 1.0,
        ("unmatched", "404"): 1.0,
    }
    assert observed[("phrasal_request_duration_seconds_sum", "/translate", "200")] > 0.0
    # The scrape itself is recorded once it has finished.
    assert samples(client)[("phrasal_request_duration_seconds_count", "/metrics", "200")] == 1.0


def test_each_app_has_its_own_registry(settings):
    first = create_app(settings, runtime_factory=lambda s: [FakeRuntime()])
    second = create_app(settings, runtime_factory=lambda s: [FakeRuntime()])
    with serving(first) as a, serving(second) as b:
        a.post("/translate", json={"text": "a", "source": "en", "target": "de"})
        assert ("phrasal_request_duration_seconds_count", "/translate", "200") in samples(a)
        assert ("phrasal_request_duration_seconds_count", "/translate", "200") not in samples(b)


class GpuFake(FakeRuntime):
    def memory_bytes(self):
        return 123_456_789


def families(client) -> dict:
    return {family.name: family for family in text_string_to_metric_families(client.get("/metrics").text)}


def value(fams: dict, family: str, sample: str, **labels) -> float:
    for s in fams[family].samples:
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise KeyError((sample, labels))


def test_metrics_exposition_matches_the_requests_made(settings):
    runtime = GpuFake()
    app = create_app(settings, runtime_factory=lambda s: [runtime])
    with serving(app) as client:
        bodies = [
            {"text": ["hello big world", "a b"]},  # 5 + 2 fake pieces
            {"text": "", "alignment": "token"},  # answered without the model
            {"text": "one two three"},  # 4 pieces ("▁thr" "ee")
        ]
        for body in bodies:
            assert client.post("/translate", json={"source": "en", "target": "de", **body}).status_code == 200
        assert client.post("/translate", json={"text": "a", "source": "en", "target": "xx"}).status_code == 422
        assert client.post("/translate", content=b"{}", headers={"content-type": "text/plain"}).status_code == 415
        assert client.get("/health/ready").status_code == 200
        fams = families(client)

    # Requests, by route template and status (the refused ones included).
    requests = {
        (s.labels["route"], s.labels["status"]): s.value
        for s in fams["phrasal_request_duration_seconds"].samples
        if s.name.endswith("_count")
    }
    assert requests == {("/translate", "200"): 3, ("/translate", "422"): 1, ("/translate", "415"): 1,
                        ("/health/ready", "200"): 1}
    # Model work: 3 texts in the model (the empty one never went), in batches of what arrived.
    calls = len(runtime.calls)
    # The bare runtime is a model named after its pair.
    assert value(fams, "phrasal_translated_segments", "phrasal_translated_segments_total", pair="en-de",
                 model="en-de") == 3
    assert value(fams, "phrasal_source_tokens", "phrasal_source_tokens_total", pair="en-de") == 5 + 2 + 4
    # Best hypotheses: "WORLD BIG HELLO" (5 pieces), "B A" (2), "THREE TWO ONE" (4).
    assert value(fams, "phrasal_generated_tokens", "phrasal_generated_tokens_total", pair="en-de") == 5 + 2 + 4
    assert value(fams, "phrasal_batch_size", "phrasal_batch_size_count", pair="en-de") == calls
    assert value(fams, "phrasal_batch_size", "phrasal_batch_size_sum", pair="en-de") == 3
    assert value(fams, "phrasal_compute_duration_seconds", "phrasal_compute_duration_seconds_count",
                 pair="en-de", backend="fake") == calls
    assert value(fams, "phrasal_queue_duration_seconds", "phrasal_queue_duration_seconds_count", pair="en-de") == 3
    # Gauges: nothing waits, nothing else in flight but the scrape itself, ready, device memory.
    assert value(fams, "phrasal_queue_depth", "phrasal_queue_depth", pair="en-de") == 0
    assert value(fams, "phrasal_requests_in_flight", "phrasal_requests_in_flight", route="/translate") == 0
    assert value(fams, "phrasal_requests_in_flight", "phrasal_requests_in_flight", route="/metrics") == 1
    assert value(fams, "phrasal_ready", "phrasal_ready") == 1
    assert value(fams, "phrasal_device_memory_bytes", "phrasal_device_memory_bytes", pair="en-de",
                 backend="fake") == 123_456_789
    # Refusals by reason; every reason is there from the start.
    rejections = {s.labels["reason"]: s.value for s in fams["phrasal_rejections"].samples if s.name.endswith("_total")}
    assert rejections["invalid_request"] == 1 and rejections["unsupported_media_type"] == 1
    assert sum(rejections.values()) == 2
    # Labels only from bounded sets.
    names = {name for fam in fams.values() for s in fam.samples for name in s.labels}
    assert names <= {"route", "status", "pair", "model", "backend", "reason", "outcome", "le"}
    outcomes = {s.labels["outcome"] for s in fams["phrasal_documents"].samples}
    assert outcomes == {"accepted", "done", "failed"}  # a fixed set, there from the start


def test_no_device_memory_series_on_cpu(client):
    assert not [s for s in families(client)["phrasal_device_memory_bytes"].samples]
