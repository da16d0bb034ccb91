"""create_app wiring: settings read once, runtimes loaded and warmed in the background once the
lifespan starts, closed at shutdown; a failed load leaves the process live but not ready with
the reason; draining; the CLI entry point."""

from __future__ import annotations

import logging
import sys
import threading
import types
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import ValidationError

from service.__main__ import main
from service.app import create_app
from service.settings import Settings
from testing.fake_runtime import FakeRuntime, fake_runtimes
from tests.service.support import serving


def test_runtimes_load_in_the_lifespan_not_in_create_app(settings, runtime):
    calls = []
    app = create_app(settings, runtime_factory=lambda s: calls.append(s) or [runtime])
    assert calls == [] and runtime.warmups == 0
    with serving(app):
        assert calls == [settings]
        assert runtime.warmups == 1
        assert not runtime.closed
    assert runtime.closed


def test_warmup_can_be_switched_off(runtime):
    app = create_app(Settings(warmup=False), runtime_factory=lambda s: [runtime])
    with serving(app) as client:
        assert client.get("/health").status_code == 200
    assert runtime.warmups == 0


@pytest.mark.parametrize(
    ("runtimes", "reason"),
    [
        ([FakeRuntime("en", "de"), FakeRuntime("en", "de")], "ValueError: two models are named 'en-de'"),
        ([], "ValueError: no runtime loaded: nothing to serve"),
        ([object()], "TypeError: object is not a service.runtime.base.TranslationRuntime"),
    ],
)
def test_a_bad_runtime_set_leaves_the_process_live_but_not_ready(settings, runtimes, reason, caplog):
    app = create_app(settings, runtime_factory=lambda s: runtimes)
    with caplog.at_level(logging.ERROR, logger="service"), serving(app) as client:
        assert client.get("/health/live").json() == {"status": "ok"}
        response = client.get("/health/ready")
        assert response.status_code == 503
        assert response.json() == {
            "status": "unavailable", "phase": "failed", "pairs": [], "reason": f"model load failed: {reason}"
        }
        assert client.get("/health").json() == response.json()
        translation = client.post("/translate", json={"text": "a", "source": "en", "target": "de"})
        assert translation.status_code == 503
        assert translation.json()["message"] == f"not ready: model load failed: {reason}"
        assert "retry-after" not in translation.headers  # retrying will not help
    assert f"model load failed; the service stays up but not ready: {reason}" in caplog.text
    assert all(r.closed for r in runtimes if isinstance(r, FakeRuntime))


def test_a_failing_factory_is_reported_in_one_line(settings):
    def factory(s):
        raise FileNotFoundError("models/test-en-de/manifest.json: no such file\nsecond line")

    with serving(create_app(settings, runtime_factory=factory)) as client:
        reason = client.get("/health/ready").json()["reason"]
    assert reason == "model load failed: FileNotFoundError: models/test-en-de/manifest.json: no such file"


def test_live_answers_while_models_load_and_ready_says_so(settings, runtime):
    release = threading.Event()
    app = create_app(settings, runtime_factory=lambda s: release.wait(10) and [runtime])
    with TestClient(app) as client:
        assert client.get("/health/live").status_code == 200
        response = client.get("/health/ready")
        assert response.status_code == 503
        assert response.json() == {"status": "unavailable", "phase": "loading", "pairs": [], "reason": "loading models"}
        translation = client.post("/translate", json={"text": "a", "source": "en", "target": "de"})
        assert translation.status_code == 503
        assert translation.headers["retry-after"] == "5"
        assert translation.json()["message"] == "not ready: loading models"
        release.set()
        client.portal.call(app.state.lifecycle.wait_loaded)
        assert client.get("/health/ready").json() == {"status": "ok", "phase": "ready", "pairs": ["en-de"]}


def test_draining_turns_ready_off_but_still_serves_what_reaches_it(settings, runtime):
    app = create_app(settings, runtime_factory=lambda s: [runtime])
    with serving(app) as client:
        app.state.lifecycle.begin_drain()
        response = client.get("/health/ready")
        assert response.status_code == 503
        assert response.json() == {
            "status": "unavailable", "phase": "draining", "pairs": [],
            "reason": "shutting down: finishing the requests in flight",
        }
        assert client.get("/health/live").status_code == 200
        # uvicorn has stopped accepting connections; a request that got in is in flight.
        assert client.post("/translate", json={"text": "a", "source": "en", "target": "de"}).status_code == 200


def test_default_factory_is_torch_runtime_load_runtime_imported_lazily(settings, monkeypatch):
    loaded = []
    stand_in = types.ModuleType("service.runtime.torch_runtime")
    stand_in.load_runtime = lambda path, device, static_decoding, cpu_quantization, cpu_kernels, decoding: (
        loaded.append((path, device, static_decoding, cpu_quantization, cpu_kernels, decoding)) or FakeRuntime("de", "en"))
    monkeypatch.setitem(sys.modules, "service.runtime.torch_runtime", stand_in)
    app = create_app(settings)
    assert loaded == []
    with serving(app) as client:
        assert client.get("/health").json() == {"status": "ok", "phase": "ready", "pairs": ["de-en"]}
    assert loaded == [(Path("models/test-en-de"), "auto", "auto", "auto", "auto", settings.decoding)]


def test_the_fake_runtime_factory_serves_pairs_named_by_the_directories():
    settings = Settings(model_dirs=["models/en-de", "x/fr-en"])
    with serving(create_app(settings, runtime_factory=fake_runtimes)) as client:
        assert client.get("/health").json()["pairs"] == ["en-de", "fr-en"]
        response = client.post("/translate", json={"text": "le chat", "source": "fr", "target": "en"})
        assert response.json()["translations"] == [[{"text": "CHAT LE", "score": -0.5}]]


def test_settings_come_from_phrasal_environment(monkeypatch):
    assert Settings().model_dirs == [Path("models/en-de-align2"), Path("models/en-de-software"), Path("models/de-en-align"), Path("models/de-en-software"),
                                     Path("models/en-fr")]
    monkeypatch.setenv("PHRASAL_MODEL_DIRS", '["models/en-de", "models/en-fr"]')
    monkeypatch.setenv("PHRASAL_DEVICE", "cpu")
    monkeypatch.setenv("PHRASAL_MAX_SEGMENTS", "8")
    settings = Settings()
    assert settings.model_dirs == [Path("models/en-de"), Path("models/en-fr")]
    assert (settings.device, settings.max_segments, settings.default_beam_size) == ("cpu", 8, 5)


@pytest.mark.parametrize(
    ("name", "value", "field"),
    [
        ("PHRASAL_DEVICE", "tpu", "device"),
        ("PHRASAL_MODEL_DIRS", '["a", "a"]', "model_dirs lists a twice"),
        ("PHRASAL_DEFAULT_BEAM_SIZE", "17", "default_beam_size"),
        ("PHRASAL_LENGTH_PENALTY_FORM", "average", "length_penalty_form"),
    ],
)
def test_invalid_settings_are_refused(monkeypatch, name, value, field):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match=field):
        Settings()


def test_the_ct2_backend_refuses_the_gnmt_length_penalty_at_start(monkeypatch):
    # CTranslate2 only has |y|^α: the server does not start rather than rank by the other formula.
    monkeypatch.setenv("PHRASAL_BACKEND", "ct2")
    monkeypatch.setenv("PHRASAL_LENGTH_PENALTY_FORM", "gnmt")
    with pytest.raises(ValidationError, match=r"backend 'ct2': length_penalty_form 'gnmt' is not offered by CTranslate2"):
        Settings()
    monkeypatch.setenv("PHRASAL_BACKEND", "torch")
    assert Settings().length_penalty_form == "gnmt"


def test_main_serves_the_app_with_the_settings(monkeypatch):
    import service.server

    seen = {}
    monkeypatch.setenv("PHRASAL_DRAIN_TIMEOUT_S", "7")
    monkeypatch.setattr(service.server, "serve", lambda app, settings, **kwargs: seen.update(app=app, settings=settings, **kwargs))
    assert main(["--host", "0.0.0.0", "--port", "9123"]) == 0
    assert isinstance(seen.pop("app"), FastAPI)
    assert seen.pop("settings").drain_timeout_s == 7
    assert seen == {"host": "0.0.0.0", "port": 9123, "log_level": "info"}


def test_main_reports_bad_settings_in_one_line(monkeypatch, capsys):
    monkeypatch.setenv("PHRASAL_DEVICE", "tpu")
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: invalid settings: PHRASAL_DEVICE: ")


@pytest.mark.parametrize("name, value, said", [
    ("PHRASAL_MEMORIES", "memories/cldr-names.tmx", "error: invalid settings: PHRASAL_MEMORIES: not JSON"),
    ("PHRASAL_MEMORIES", '["nowhere.tmx"]', "error: invalid settings: Value error, memories: no file nowhere.tmx"),
    ("PHRASAL_MODEL_DIRS", "models/en-de", "error: invalid settings: PHRASAL_MODEL_DIRS: not JSON"),
])
def test_main_reports_a_setting_that_is_not_json_or_a_missing_memory_in_one_line(monkeypatch, capsys, name, value, said):
    monkeypatch.setenv(name, value)
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(said), err
