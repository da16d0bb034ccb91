"""SIGTERM while the models load or warm up is a stop that stands: the service never turns
ready afterwards, skips the warm-ups still to come, closes what was loaded, and a load in
inference processes is cut short instead of making the shutdown wait for it."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from functools import partial

import pytest

from service.app import process_options
from service.lifecycle import Lifecycle
from service.metrics import Metrics
from service.runtime.base import ModelLoadFailed, load_abandoned
from service.runtime.factory import RuntimeSpec, load_runtime
from service.runtime.inference_process import load_process_runtimes
from service.settings import Settings
from testing.fake_runtime import FakeRuntime


class SlowWarmup(FakeRuntime):
    def __init__(self, source: str, started: threading.Event, release: threading.Event) -> None:
        super().__init__(source, "de")
        self.started, self.release = started, release

    def warmup(self) -> None:
        super().warmup()
        self.started.set()
        self.release.wait(30)


async def drive(lifecycle: Lifecycle, reached: threading.Event, release: threading.Event) -> list[str]:
    """Start loading, SIGTERM once ``reached``, let the load go on, and record the phases."""
    phases = []
    lifecycle.start_loading()
    await asyncio.to_thread(reached.wait, 30)
    phases.append(lifecycle.phase)
    lifecycle.begin_drain()
    phases.append(lifecycle.phase)
    release.set()
    await lifecycle.wait_loaded()
    phases.append(lifecycle.phase)
    await lifecycle.shutdown()
    phases.append(lifecycle.phase)
    return phases


def test_sigterm_during_the_load_is_not_overwritten_by_the_warm_up():
    reached, release = threading.Event(), threading.Event()
    runtime = FakeRuntime()

    def factory(settings):
        reached.set()
        release.wait(30)
        return [runtime]

    lifecycle = Lifecycle(Settings(model_dirs=["models/test-en-de"]), factory, Metrics())
    assert asyncio.run(drive(lifecycle, reached, release)) == ["loading", "draining", "draining", "stopped"]
    assert (runtime.warmups, runtime.closed, lifecycle.translator) == (0, True, None)


def test_sigterm_during_the_warm_up_skips_the_warm_ups_left_and_never_turns_ready():
    reached, release = threading.Event(), threading.Event()
    first = SlowWarmup("en", reached, release)
    second = FakeRuntime("fr", "de")
    settings = Settings(model_dirs=["models/test-en-de", "models/test-fr-de"])
    lifecycle = Lifecycle(settings, lambda s: [first, second], Metrics())
    assert asyncio.run(drive(lifecycle, reached, release)) == ["warming", "draining", "draining", "stopped"]
    assert (first.warmups, second.warmups) == (1, 0)
    assert first.closed and second.closed and lifecycle.translator is None


def test_an_abandoned_load_kills_the_loading_children(tmp_path):
    abandon = threading.Event()
    abandon.set()  # SIGTERM came before the children answered
    before = set(multiprocessing.active_children())
    load = partial(load_runtime, RuntimeSpec("torch", tmp_path / "en-de", "cpu"))
    token = load_abandoned.set(abandon)
    try:
        with pytest.raises(ModelLoadFailed) as error:
            load_process_runtimes([load], process_options(Settings()))
    finally:
        load_abandoned.reset(token)
    assert str(error.value) == "loading stopped: the server is shutting down"
    assert set(multiprocessing.active_children()) <= before
