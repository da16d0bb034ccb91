"""Backpressure: a full queue answers 503 + Retry-After at once; deadlines answer 503 (never
started) or 504 (computing); nothing is lost when the gate opens."""

from __future__ import annotations

import threading

from service.app import create_app
from service.settings import Settings
from testing.fake_runtime import FakeRuntime
from tests.service.support import Background, queued, serving, wait_until
from tests.service.test_batching import sample

BASE = {"source": "en", "target": "de"}


def gated_app(settings: Settings):
    """An app whose model calls wait for the returned gate (runtime.entered says one began)."""
    gate = threading.Event()
    runtime = FakeRuntime(gate=gate)
    return create_app(settings, runtime_factory=lambda s: [runtime]), runtime, gate


def test_a_full_queue_answers_503_with_retry_after_and_the_held_requests_all_finish():
    # One text per batch, four texts may wait: the worker holds one request, four more fill up.
    settings = Settings(max_segments=4, max_queue=4, max_batch_sentences=1, max_wait_ms=0, retry_after_s=2)
    app, runtime, gate = gated_app(settings)
    with serving(app) as client:
        background = Background(client)
        background.post({**BASE, "text": "held in compute"})
        assert runtime.entered.acquire(timeout=10)
        for k in range(4):
            background.post({**BASE, "text": f"queued {k}"})
        wait_until(lambda: queued(app) == 4, what="a full queue")

        refused = [client.post("/translate", json={**BASE, "text": f"extra {k}"}) for k in range(10)]
        for response in refused:
            assert response.status_code == 503
            assert response.headers["retry-after"] == "2"
            assert response.json() == {
                "message": "server busy: 4 texts queued for en-de (limit 4); retry later",
                "detail": [],
            }
        # A request that would not fit whole is refused whole, even when some room is left.
        assert queued(app) == 4

        gate.set()
        held = background.join()
        metrics = client.get("/metrics").text
    assert [r.status_code for r in held] == [200] * 5
    assert [r.json()["translations"][0][0]["text"] for r in held] == [
        "COMPUTE IN HELD", "0 QUEUED", "1 QUEUED", "2 QUEUED", "3 QUEUED"
    ]
    assert sorted(texts[0] for texts, _ in runtime.calls) == sorted(
        ["held in compute"] + [f"queued {k}" for k in range(4)]
    )  # the refused texts never reached the model
    assert sample(metrics, "phrasal_rejections_total", {"reason": "queue_full"}) == 10
    assert sample(metrics, "phrasal_request_duration_seconds_count", {"route": "/translate", "status": "503"}) == 10
    assert sample(metrics, "phrasal_queue_depth", {"pair": "en-de"}) == 0


def test_an_idle_server_takes_a_request_cut_into_more_segments_than_its_queue_holds():
    # Four texts of three lines each are twelve segments; they had been "server busy" on an idle server.
    settings = Settings(max_segments=4, max_queue=4, max_wait_ms=0)
    app, runtime, gate = gated_app(settings)
    gate.set()
    with serving(app) as client:
        response = client.post("/translate", json={**BASE, "text": ["one line\nTwo lines\nThree lines"] * 4})
    assert response.status_code == 200
    assert [nbest[0]["text"] for nbest in response.json()["translations"]] == ["LINE ONE\nLINES TWO\nLINES THREE"] * 4


def test_deadlines_answer_504_while_computing_and_503_while_queued():
    settings = Settings(request_timeout_s=0.3, max_wait_ms=0, retry_after_s=1)
    app, runtime, gate = gated_app(settings)
    with serving(app) as client:
        background = Background(client)
        background.post({**BASE, "text": "slow"})
        assert runtime.entered.acquire(timeout=10)
        background.post({**BASE, "text": "waits"})
        computing, waiting = background.join()
        assert computing.status_code == 504
        assert computing.json()["message"] == "translation took longer than the 0.3 s deadline"
        assert waiting.status_code == 503
        assert waiting.headers["retry-after"] == "1"
        assert waiting.json()["message"] == "server busy: not started within the 0.3 s deadline; retry later"
        assert queued(app) == 0  # the timed-out text left the queue
        gate.set()
        # The worker finishes the abandoned batch, throws its result away, and serves again.
        after = client.post("/translate", json={**BASE, "text": "next"})
        assert after.status_code == 200
        metrics = client.get("/metrics").text
    assert [texts for texts, _ in runtime.calls] == [["slow"], ["next"]]
    assert sample(metrics, "phrasal_rejections_total", {"reason": "deadline_in_compute"}) == 1
    assert sample(metrics, "phrasal_rejections_total", {"reason": "deadline_in_queue"}) == 1


def test_requests_beyond_max_connections_get_503_while_health_and_metrics_still_answer():
    settings = Settings(max_connections=2, max_batch_sentences=1, max_wait_ms=0, retry_after_s=3, request_timeout_s=5)
    app, runtime, gate = gated_app(settings)
    with serving(app) as client:
        background = Background(client)
        background.post({**BASE, "text": "held in compute"})
        assert runtime.entered.acquire(timeout=10)
        background.post({**BASE, "text": "queued"})
        wait_until(lambda: queued(app) == 1, what="the second request in the queue")

        refused = client.post("/translate", json={**BASE, "text": "one too many"})
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "3"
        assert refused.json() == {"message": "server busy: 2 requests in progress (limit 2); retry later", "detail": []}
        assert client.get("/health/ready").status_code == 200  # probes are never refused
        metrics = client.get("/metrics").text

        gate.set()
        assert [r.status_code for r in background.join()] == [200, 200]
        assert client.post("/translate", json={**BASE, "text": "room again"}).status_code == 200
    assert sample(metrics, "phrasal_rejections_total", {"reason": "overloaded"}) == 1
    assert sample(metrics, "phrasal_request_duration_seconds_count", {"route": "/translate", "status": "503"}) == 1
    assert [texts for texts, _ in runtime.calls] == [["held in compute"], ["queued"], ["room again"]]
