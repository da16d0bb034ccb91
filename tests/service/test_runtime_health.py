"""A loaded runtime that cannot serve for a while (its inference process stalled, restarting or
failing to restart: ``TranslationRuntime.health``) takes the service out of readiness with that
runtime's phase and reason, and a runtime that refuses batches meanwhile (``RuntimeUnavailable``)
is a 503 with Retry-After, not a 500."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from service.app import create_app
from service.runtime.base import RuntimeProblem, RuntimeUnavailable
from service.settings import Settings
from testing.fake_runtime import FakeRuntime
from tests.service.support import serving

BODY = {"text": "a dog", "source": "en", "target": "de"}


class Troubled(FakeRuntime):
    def __init__(self) -> None:
        super().__init__()
        self.problem: RuntimeProblem | None = None
        self.unavailable: RuntimeUnavailable | None = None
        self.restart_count = 0

    def health(self):
        return self.problem

    def restarts(self):
        return self.restart_count

    def translate(self, texts, options):
        if self.unavailable is not None:
            raise self.unavailable
        return super().translate(texts, options)


def metric(client, line_start: str) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(line_start):
            return float(line.split()[-1])
    raise AssertionError(f"no {line_start}")


def test_readiness_reports_a_runtime_problem_and_recovers(settings):
    runtime = Troubled()
    with serving(create_app(settings, runtime_factory=lambda s: [runtime])) as client:
        assert client.get("/health/ready").json() == {"status": "ok", "phase": "ready", "pairs": ["en-de"]}
        assert metric(client, "phrasal_ready ") == 1
        for phase in ("stalled", "restarting", "failed"):
            runtime.problem = RuntimeProblem(phase, f"the inference process for en-de: {phase}")
            response = client.get("/health/ready")
            assert (response.status_code, response.json()) == (
                503,
                {"status": "unavailable", "phase": phase, "pairs": [], "reason": f"the inference process for en-de: {phase}"},
            )
            assert metric(client, "phrasal_ready ") == 0
        runtime.problem = None
        assert client.get("/health/ready").status_code == 200
        assert metric(client, "phrasal_ready ") == 1


def test_restarts_are_exported_per_model(settings):
    runtime = Troubled()
    with serving(create_app(settings, runtime_factory=lambda s: [runtime])) as client:
        assert metric(client, 'phrasal_inference_restarts_total{model="en-de",pair="en-de"}') == 0
        runtime.restart_count = 3
        assert metric(client, 'phrasal_inference_restarts_total{model="en-de",pair="en-de"}') == 3


def test_a_runtime_refusing_batches_is_a_503_with_its_reason_and_retry_after(settings):
    runtime = Troubled()
    with serving(create_app(settings, runtime_factory=lambda s: [runtime])) as client:
        runtime.unavailable = RuntimeUnavailable("the inference process for en-de failed to restart: X", retry_after=4)
        response = client.post("/translate", json=BODY)
        assert (response.status_code, response.headers["retry-after"], response.json()) == (
            503, "4", {"message": "the inference process for en-de failed to restart: X", "detail": []}
        )
        assert metric(client, 'phrasal_rejections_total{reason="not_ready"}') == 1
        runtime.unavailable = None
        assert client.post("/translate", json=BODY).status_code == 200


def test_a_restart_backoff_cap_below_its_start_is_refused():
    with pytest.raises(ValidationError) as error:
        Settings(inference_restart_backoff_s=5, inference_restart_backoff_max_s=2)
    assert "inference_restart_backoff_max_s (2) must be at least inference_restart_backoff_s (5)" in str(error.value)
