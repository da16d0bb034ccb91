"""create_app wiring: settings read once, runtimes loaded and warmed in the lifespan, closed at
shutdown; startup fails loudly on a bad runtime set; the CLI entry point."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import ValidationError

from service.__main__ import main
from service.app import create_app
from service.runtime.fake import FakeRuntime
from service.settings import Settings


def test_runtimes_load_in_the_lifespan_not_in_create_app(settings, runtime):
    calls = []
    app = create_app(settings, runtime_factory=lambda s: calls.append(s) or [runtime])
    assert calls == [] and runtime.warmups == 0
    with TestClient(app):
        assert calls == [settings]
        assert runtime.warmups == 1
        assert not runtime.closed
    assert runtime.closed


def test_warmup_can_be_switched_off(runtime):
    app = create_app(Settings(warmup=False), runtime_factory=lambda s: [runtime])
    with TestClient(app) as client:
        assert client.get("/health").status_code == 200
    assert runtime.warmups == 0


@pytest.mark.parametrize(
    ("runtimes", "error", "message"),
    [
        ([FakeRuntime("en", "de"), FakeRuntime("en", "de")], ValueError, "two runtimes serve en-de"),
        ([], ValueError, "no runtime loaded"),
        ([object()], TypeError, "object is not a service.runtime.base.TranslationRuntime"),
    ],
)
def test_startup_fails_on_a_bad_runtime_set(settings, runtimes, error, message):
    app = create_app(settings, runtime_factory=lambda s: runtimes)
    with pytest.raises(error, match=message):
        with TestClient(app):
            pass
    assert all(r.closed for r in runtimes if isinstance(r, FakeRuntime))


def test_default_factory_is_torch_runtime_load_runtimes_imported_lazily(settings, monkeypatch):
    loaded = []
    stand_in = types.ModuleType("service.runtime.torch_runtime")
    stand_in.load_runtimes = lambda s: loaded.append(s) or [FakeRuntime("de", "en")]
    monkeypatch.setitem(sys.modules, "service.runtime.torch_runtime", stand_in)
    app = create_app(settings)
    assert loaded == []
    with TestClient(app) as client:
        assert client.get("/health").json() == {"status": "ok", "pairs": ["de-en"]}
    assert loaded == [settings]


def test_settings_come_from_phrasal_environment(monkeypatch):
    assert Settings().model_dirs == [Path("models/en-de")]
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
    ],
)
def test_invalid_settings_are_refused(monkeypatch, name, value, field):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match=field):
        Settings()


def test_main_runs_uvicorn_on_the_app(monkeypatch):
    import uvicorn

    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: seen.update(app=app, **kwargs))
    assert main(["--host", "0.0.0.0", "--port", "9123"]) == 0
    assert isinstance(seen.pop("app"), FastAPI)
    assert seen == {"host": "0.0.0.0", "port": 9123, "log_level": "info"}


def test_main_reports_bad_settings_in_one_line(monkeypatch, capsys):
    monkeypatch.setenv("PHRASAL_DEVICE", "tpu")
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: invalid settings: PHRASAL_DEVICE: ")
