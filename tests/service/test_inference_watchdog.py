"""A real server whose model runs in an inference process (the default), faulted as an operator
or the kernel would: the child stopped (SIGSTOP) is killed by the watchdog and replaced; a child
that cannot be replaced (its model directory gone) is reported and retried with backoff, and
heals once the directory is back. Readiness says what is going on throughout."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.service.support import wait_until
from tests.service.test_server_process import REPO, Server, request

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc for the child's pid")

BODY = {"text": "Two dogs play in the snow.", "source": "en", "target": "de", "beam_size": 2}


def inference_children(pid: int) -> list[int]:
    """The server's spawned children (multiprocessing's spawn_main), by /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"spawn_main" in cmdline:
            found.append(int(entry.name))
    return found


def health(server: Server) -> tuple[int, dict]:
    time.sleep(0.1)  # polled: leave the CPU to the process being restarted
    status, text = request(server.port, "GET", "/health/ready", timeout=5)
    return status, json.loads(text)


def restarts(server: Server) -> float:
    _, text = request(server.port, "GET", "/metrics")
    for line in text.splitlines():
        if line.startswith('phrasal_inference_restarts_total{model="en-de",pair="en-de"}'):
            return float(line.split()[-1])
    raise AssertionError("no phrasal_inference_restarts_total for en-de")


def the_child(server: Server) -> int:
    children = inference_children(server.process.pid)
    assert len(children) == 1, children
    return children[0]


def test_a_stopped_child_is_killed_and_replaced_and_a_child_that_cannot_load_is_retried(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # docs/operations.md: leave the HTTP loop a core
    model_dir = tmp_path / "en-de"
    shutil.copytree(REPO / "models" / "en-de", model_dir)
    server = Server(
        fake=False,
        model_dirs=json.dumps([str(model_dir)]),
        device="cpu",
        request_timeout_s="10",
        inference_grace_s="2",
        inference_restart_backoff_s="1",
        inference_restart_backoff_max_s="2",
    )
    try:
        server.wait_ready()
        assert restarts(server) == 0

        # (a) A stopped child: the request times out, readiness says "stalled", the watchdog
        # kills it after request_timeout_s + inference_grace_s, and a new child serves.
        stopped = the_child(server)
        os.kill(stopped, signal.SIGSTOP)
        status, text = request(server.port, "POST", "/translate", BODY)
        assert (status, json.loads(text)["message"]) == (504, "translation took longer than the 10 s deadline")
        phases = set()

        def healed() -> bool:
            status, body = health(server)
            phases.add(body["phase"])
            return status == 200

        wait_until(healed, timeout=60, what="a new inference process")
        assert "stalled" in phases
        assert not Path(f"/proc/{stopped}").exists() or b"zombie" in Path(f"/proc/{stopped}/status").read_bytes()
        assert the_child(server) != stopped
        assert restarts(server) == 1
        status, text = request(server.port, "POST", "/translate", BODY)
        assert status == 200 and json.loads(text)["translations"][0][0]["text"]

        # (b) The model directory goes away, then the idle child dies: the watchdog's ping finds
        # it gone, and the replacement cannot load. Readiness says so before any request comes.
        hidden = tmp_path / "hidden"
        model_dir.rename(hidden)
        os.kill(the_child(server), signal.SIGKILL)
        failed = f"the inference process for en-de failed to restart: ArtifactError: model directory {model_dir} does not exist; next attempt in "
        wait_until(lambda: health(server)[1]["phase"] == "failed", timeout=60, what="the failed restart")
        status, body = health(server)
        assert (status, body["phase"]) == (503, "failed")
        assert body["reason"].startswith(failed), body
        status, text = request(server.port, "POST", "/translate", BODY)
        assert status == 503, text
        assert json.loads(text)["message"].startswith(failed), text
        # Requests meanwhile are refused at once with the reason, without starting children.
        status, text = request(server.port, "POST", "/translate", BODY)
        assert status == 503 and json.loads(text)["message"].startswith(failed), text
        assert restarts(server) >= 2

        # Back in place: a background retry (after its backoff) loads it again.
        hidden.rename(model_dir)
        wait_until(lambda: health(server)[0] == 200, timeout=60, what="the retry to load the model")
        status, text = request(server.port, "POST", "/translate", BODY)
        assert status == 200
        assert restarts(server) >= 3
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=30) == 0
    finally:
        code, log = server.stop()
    assert code == 0
    assert "has not answered a batch for" in log and "killing it" in log
    assert "inference process for en-de found gone while idle" in log
    assert "failed to restart: ArtifactError" in log
    # The only tracebacks: each failed load's, logged by its child.
    assert log.count("Traceback") == log.count("ERROR service.runtime.process[child]: loading failed") >= 1
