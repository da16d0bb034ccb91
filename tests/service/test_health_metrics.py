"""GET /health and GET /metrics."""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from service.app import create_app
from service.runtime.fake import FakeRuntime


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
    with TestClient(create_app(settings, runtime_factory=lambda s: runtimes)) as client:
        response = client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "pairs": ["en-de", "en-fr"]}


def test_health_is_503_until_models_are_loaded(settings, runtime):
    app = create_app(settings, runtime_factory=lambda s: [runtime])
    client = TestClient(app)  # used without "with": the lifespan (model loading) has not run
    response = client.get("/health")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "pairs": []}
    with TestClient(app) as loaded:
        assert loaded.get("/health").status_code == 200
    # After shutdown the runtimes are closed and the service is unavailable again.
    assert runtime.closed
    assert client.get("/health").status_code == 503


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
    with TestClient(first) as a, TestClient(second) as b:
        a.post("/translate", json={"text": "a", "source": "en", "target": "de"})
        assert ("phrasal_request_duration_seconds_count", "/translate", "200") in samples(a)
        assert ("phrasal_request_duration_seconds_count", "/translate", "200") not in samples(b)
