"""The per-request cost budget (max_request_cost): source tokens x beam_size summed over the
texts; a request over it is a 422 naming the budget before anything is queued, and a batch whose
requests have all gone (deadline, disconnect) is stopped instead of holding the model."""

from __future__ import annotations

import json
import signal
import threading

from service.app import create_app
from service.settings import Settings
from testing.fake_runtime import FakeRuntime
from tests.service.support import serving, wait_until
from tests.service.test_server_process import Server, request


def test_a_request_over_the_budget_is_a_422_naming_it_and_costs_nothing(runtime):
    # The fake reads one piece per word of up to four characters: "a b c" is 3 tokens.
    settings = Settings(model_dirs=["models/test-en-de"], max_request_cost=30)
    with serving(create_app(settings, runtime_factory=lambda s: [runtime])) as client:
        body = {"source": "en", "target": "de", "text": ["a b c", "d e f", ""], "beam_size": 6}
        response = client.post("/translate", json=body)
        assert (response.status_code, response.json()["message"]) == (
            422,
            "text: this request would cost 36 (6 source tokens x beam_size 6); the budget is 30 per request "
            "(max_request_cost): send fewer or shorter texts, or a smaller beam_size",
        )
        assert response.json()["detail"][0]["type"] == "over_budget"
        assert runtime.calls == []
        # At the budget exactly: served (empty texts cost nothing).
        assert client.post("/translate", json={**body, "beam_size": 5}).status_code == 200
        assert len(runtime.calls) == 1


def test_no_budget_when_unset(runtime):
    settings = Settings(model_dirs=["models/test-en-de"], max_request_cost=None)
    with serving(create_app(settings, runtime_factory=lambda s: [runtime])) as client:
        body = {"source": "en", "target": "de", "text": ["a b c d"] * 64, "beam_size": 16}
        assert client.post("/translate", json=body).status_code == 200


def test_a_batch_nobody_waits_for_is_stopped_and_the_next_one_runs():
    gate = threading.Event()
    runtime = FakeRuntime(delay_s=3600, gate=gate)
    settings = Settings(model_dirs=["models/test-en-de"], request_timeout_s=0.2, max_wait_ms=0)
    with serving(create_app(settings, runtime_factory=lambda s: [runtime])) as client:
        gate.set()
        response = client.post("/translate", json={"source": "en", "target": "de", "text": "a b"})
        assert (response.status_code, response.json()["message"]) == (
            504, "translation took longer than the 0.2 s deadline"
        )
        wait_until(lambda: runtime.cancelled == 1, timeout=30, what="the batch to stop")
        text = client.get("/metrics").text
        assert 'phrasal_cancelled_batches_total{model="en-de",pair="en-de"} 1.0' in text


def test_real_server_refuses_an_over_budget_request_and_stops_an_abandoned_batch():
    server = Server(delay_s=60, request_timeout_s="1", max_request_cost="64", max_wait_ms="0")
    try:
        server.wait_ready()
        heavy = {"source": "en", "target": "de", "text": ["one two six ten"] * 2, "beam_size": 16}
        status, text = request(server.port, "POST", "/translate", heavy)
        assert (status, json.loads(text)["message"]) == (
            422,
            "text: this request would cost 128 (8 source tokens x beam_size 16); the budget is 64 per request "
            "(max_request_cost): send fewer or shorter texts, or a smaller beam_size",
        )
        status, text = request(server.port, "POST", "/translate", {**heavy, "beam_size": 4})
        assert (status, json.loads(text)["message"]) == (504, "translation took longer than the 1 s deadline")

        def cancelled() -> bool:
            metrics = request(server.port, "GET", "/metrics")[1]
            return 'phrasal_cancelled_batches_total{model="en-de-align2",pair="en-de"} 1.0' in metrics

        wait_until(cancelled, timeout=30, what="the abandoned batch to stop")
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=30) == 0
    finally:
        code, log = server.stop()
    assert code == 0
    assert "en-de: stopped a batch of 2 texts that no request waits for" in log
    assert "still computes a batch" not in log
