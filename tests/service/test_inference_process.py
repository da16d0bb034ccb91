"""The model in a child process (service/runtime/inference_process.py) answers exactly what the
same model answers in-process, survives its child being killed, and reports load failures."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from functools import partial
from pathlib import Path

import pytest

from model.model_dir import save_model_dir
from service.app import create_app, process_options
from service.runtime.base import DecodingOptions, TextRejected
from service.runtime.factory import RuntimeSpec, load_runtime
from service.runtime.inference_process import (
    InferenceProcessDied,
    ProcessRuntime,
    load_process_runtimes,
)
from service.settings import Settings
from tests.helpers import tiny_model
from testing.fake_runtime import FakeRuntime
from tests.service.support import serving, wait_until

TEXTS = ["Two dogs play in the snow.", "A man.", "A woman in a red coat walks down a busy street."]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tiny_spm):
    path = tmp_path_factory.mktemp("process") / "en-de"
    return save_model_dir(path, tiny_model(seed=3), tiny_spm, source_lang="en", target_lang="de")


@pytest.fixture(scope="module")
def settings(model_dir):
    return Settings(model_dirs=[model_dir], device="cpu", max_length_ratio=0.5, max_length_offset=2, warmup=False)


NO_WARMUP = process_options(Settings(warmup=False))


def loader(path, device: str = "cpu"):
    """What a child runs to load the torch runtime serving ``path``."""
    return partial(load_runtime, RuntimeSpec("torch", path, device))


@pytest.fixture(scope="module")
def pair(model_dir):
    """(the in-process torch runtime, the same model behind a child process)."""
    local = loader(model_dir)()
    (remote,) = load_process_runtimes([loader(model_dir)], NO_WARMUP)
    yield local, remote
    remote.close()


def test_child_translates_exactly_like_the_in_process_runtime(pair):
    local, remote = pair
    assert (remote.pair, remote.backend) == ("en-de", "torch")
    for options in (DecodingOptions(beam_size=3, n_best=2, alignment="token"), DecodingOptions(beam_size=1)):
        assert remote.translate(TEXTS, options) == local.translate(TEXTS, options)
    assert remote.count_tokens(TEXTS) == local.count_tokens(TEXTS)
    assert remote.memory_bytes() is None  # CPU: no device memory to report


def test_child_rejects_a_text_with_the_runtimes_own_reason(pair):
    local, remote = pair
    too_long = " ".join(["dog"] * 400)
    with pytest.raises(TextRejected) as in_process:
        local.translate(["A man.", too_long], DecodingOptions())
    with pytest.raises(TextRejected) as in_child:
        remote.translate(["A man.", too_long], DecodingOptions())
    assert in_process.value.index == 1
    assert (in_child.value.index, in_child.value.reason) == (in_process.value.index, in_process.value.reason)


def test_a_killed_child_is_replaced_and_the_batch_retried(pair):
    local, remote = pair
    child = remote._process
    before = child.pid
    os.kill(before, signal.SIGKILL)
    child.join(10)
    options = DecodingOptions(beam_size=2)
    assert remote.translate(TEXTS, options) == local.translate(TEXTS, options)
    assert remote._process.pid != before and remote._process.is_alive()


def test_a_load_failure_names_the_reason_and_leaves_no_child(tmp_path):
    broken = tmp_path / "en-de"
    broken.mkdir()
    before = set(multiprocessing.active_children())
    with pytest.raises(RuntimeError) as error:
        load_process_runtimes([loader(broken)], NO_WARMUP)
    assert str(error.value) == f"ArtifactError: {broken}: missing manifest.json"
    assert set(multiprocessing.active_children()) <= before


def test_close_stops_the_child_and_later_calls_fail_cleanly(model_dir):
    runtime = ProcessRuntime(loader(model_dir), NO_WARMUP)
    runtime.wait_loaded()
    process = runtime._process
    runtime.close()
    assert not process.is_alive() and process.exitcode == 0


def test_close_kills_a_child_busy_with_a_batch_instead_of_waiting_for_it(model_dir):
    # After the drain nobody reads the batch; waiting for it would hold SIGTERM's exit a whole
    # batch past the drain timeout, long enough for an orchestrator's SIGKILL to orphan the child.
    runtime = ProcessRuntime(loader(model_dir), NO_WARMUP)
    runtime.wait_loaded()
    process = runtime._process
    os.kill(process.pid, signal.SIGSTOP)  # the child will hold the next batch for ever
    try:
        outcome = []

        def translate() -> None:
            try:
                runtime.translate(TEXTS, DecodingOptions())
            except InferenceProcessDied as exc:
                outcome.append(str(exc))

        batch = threading.Thread(target=translate, daemon=True)
        batch.start()
        wait_until(runtime._lock.locked, what="the batch to take the pipe")
        closer = threading.Thread(target=runtime.close, daemon=True)
        closer.start()
        closer.join(30)
        assert not closer.is_alive(), "close() waited for the batch"
        batch.join(30)
        assert outcome == ["the inference process for en-de was closed"]  # not retried in a new child
        assert not process.is_alive()
    finally:
        if process.is_alive():
            process.kill()


def test_a_child_runs_whatever_runtime_its_loader_builds():
    (remote,) = load_process_runtimes([partial(FakeRuntime, "en", "fr")], NO_WARMUP)
    try:
        options = DecodingOptions(beam_size=2, n_best=2, alignment="phrase")
        assert (remote.pair, remote.backend) == ("en-fr", "fake")
        assert remote.translate(TEXTS, options) == FakeRuntime("en", "fr").translate(TEXTS, options)
    finally:
        remote.close()


def test_service_on_a_child_process_answers_like_in_process(settings):
    body = {"source": "en", "target": "de", "text": TEXTS, "beam_size": 2, "n_best": 2, "alignment": "token"}
    answers = []
    for in_child in (False, True):
        with serving(create_app(settings.model_copy(update={"inference_process": in_child}))) as client:
            assert client.get("/health/ready").status_code == 200
            response = client.post("/translate", json=body)
            assert response.status_code == 200, response.text
            answers.append(response.json())
    assert answers[0] == answers[1]



def test_a_load_failure_in_the_child_is_shown_once_prefixed(tmp_path, settings):
    # The child's "ArtifactError: ..." is shown as it is, not wrapped in "RuntimeError: ...".
    broken = tmp_path / "en-de"
    broken.mkdir()
    app = create_app(settings.model_copy(update={"model_dirs": [broken], "inference_process": True}))
    with serving(app) as client:
        assert client.get("/health/ready").json() == {
            "status": "unavailable",
            "phase": "failed",
            "pairs": [],
            "reason": f"model load failed: ArtifactError: {broken}: missing manifest.json",
        }


def gated_fake_runtime(gate: Path, loads: Path) -> FakeRuntime:
    """A child's loader: a FakeRuntime; every load after the first waits until the file ``gate``
    exists, so that a test can look at the service while a replacement child is loading."""
    count = len(loads.read_text()) if loads.exists() else 0
    loads.write_text("x" * (count + 1))
    if count:
        wait_until(gate.exists, timeout=60, what="the test to open the gate")
    return FakeRuntime("en", "de")


def test_readiness_is_503_from_an_idle_childs_death_until_its_replacement_serves(tmp_path):
    gate, loads = tmp_path / "gate", tmp_path / "loads"
    factory = lambda settings: load_process_runtimes([partial(gated_fake_runtime, gate, loads)], NO_WARMUP)  # noqa: E731
    app = create_app(Settings(warmup=False), runtime_factory=factory)
    with serving(app) as client:
        assert client.get("/health/ready").status_code == 200
        (runtime,) = app.state.lifecycle.translator.runtimes
        child = runtime._process
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)  # gone for certain; idle, so only readiness can tell
        answer = client.get("/health/ready")
        assert answer.status_code == 503
        assert answer.json()["phase"] == "restarting"
        assert answer.json()["reason"].startswith("the inference process for en-de ")
        gate.touch()
        wait_until(lambda: client.get("/health/ready").status_code == 200, timeout=120, what="the replacement child")
        assert runtime.restarts() == 1 and runtime._process.pid != child.pid
        response = client.post("/translate", json={"text": "a b", "source": "en", "target": "de"})
        assert response.status_code == 200, response.text


def test_a_child_reaped_by_another_thread_reads_as_exited():
    # multiprocessing's is_alive() asks waitpid, which fails with ECHILD for a child another thread
    # reaped, and reads that as "still running": readiness had said 200 for a killed child.
    from service.runtime.inference_process import _CONTEXT, _exited

    process = _CONTEXT.Process(target=time.sleep, args=(60,), daemon=True)
    process.start()
    assert not _exited(process)
    os.kill(process.pid, signal.SIGKILL)
    os.waitpid(process.pid, 0)  # what another thread's join does first
    assert process.is_alive()  # the misreading
    assert _exited(process)
