"""Service test fixtures: the app with a FakeRuntime injected through the runtime factory."""

from __future__ import annotations

import os

import pytest

from service.app import create_app
from service.settings import Settings
from testing.fake_runtime import FakeRuntime
from tests.service.support import serving


@pytest.fixture(autouse=True)
def _no_phrasal_environment(monkeypatch):
    """Settings read PHRASAL_* variables; the developer's shell must not change test results."""
    for name in list(os.environ):
        if name.startswith("PHRASAL_"):
            monkeypatch.delenv(name)
    # Models load in-process here (a child process per test would cost seconds of start-up);
    # tests/service/test_inference_process.py runs the child-process path.
    monkeypatch.setenv("PHRASAL_INFERENCE_PROCESS", "false")


@pytest.fixture
def settings() -> Settings:
    return Settings(model_dirs=["models/test-en-de"], max_segments=4, max_chars=40)


@pytest.fixture
def runtime() -> FakeRuntime:
    return FakeRuntime("en", "de")


@pytest.fixture
def client(settings, runtime):
    factory_calls = []

    def factory(received: Settings):
        factory_calls.append(received)
        return [runtime]

    app = create_app(settings, runtime_factory=factory)
    with serving(app) as test_client:  # runs the lifespan and waits for the models to load
        assert factory_calls == [settings]
        yield test_client


@pytest.fixture
def translate(client):
    """POST /translate with en->de unless the body says otherwise."""

    def post(**body):
        return client.post("/translate", json={"source": "en", "target": "de", **body})

    return post
