"""The real server process: ``python -m service``'s code under uvicorn on 127.0.0.1 and a free port,
serving the test fake runtime (``python -m testing.fake_server``; each batch sleeps
``--delay-s``), then SIGTERM while requests are in flight."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from testing.live_server import free_port
from tests.service.support import wait_until

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def request(port: int, method: str, path: str, body: dict | None = None, timeout: float = 30.0):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        payload = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if body is not None else {}
        connection.request(method, path, body=payload, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def in_flight(port: int) -> float:
    _, text = request(port, "GET", "/metrics")
    for line in text.splitlines():
        if line.startswith('phrasal_requests_in_flight{route="/translate"}'):
            return float(line.split()[-1])
    return 0.0


class Server:
    """``python -m testing.fake_server`` with PHRASAL_* ``settings``, each batch sleeping
    ``delay_s``; ``python -m service`` itself (the model directories' backend) when ``fake=False``."""

    def __init__(self, fake: bool = True, delay_s: float = 0.0, **settings: str) -> None:
        self.port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PHRASAL_")}
        env.update({f"PHRASAL_{k.upper()}": v for k, v in settings.items()})
        entry = ["testing.fake_server", "--delay-s", str(delay_s)] if fake else ["service"]
        self.process = subprocess.Popen(
            [sys.executable, "-m", *entry, "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )

    def wait_ready(self) -> None:
        def ready() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(f"the server exited with {self.process.returncode}: {self.process.stdout.read()}")
            time.sleep(0.1)  # a poll storm would starve a model loading on a small machine
            try:
                return request(self.port, "GET", "/health/ready", timeout=1)[0] == 200
            except OSError:
                return False

        try:
            wait_until(ready, timeout=60, what="the server to be ready")
        except AssertionError as exc:
            if self.process.poll() is not None:
                raise
            raise AssertionError(f"{exc}; its log:\n{self.stop()[1]}") from None

    def stop(self) -> tuple[int, str]:
        if self.process.poll() is None:
            self.process.kill()
        out, _ = self.process.communicate(timeout=30)
        return self.process.returncode, out


def send_in_threads(port: int, bodies: list[dict], timeout: float = 30.0) -> tuple[list[threading.Thread], dict]:
    """POST each body from a thread of its own; results[k]: (status, body) or the exception raised.
    `timeout`: each client's socket timeout (a real model on a busy box needs more than the fake)."""
    results: dict[int, object] = {}

    def run(k: int, body: dict) -> None:
        try:
            results[k] = request(port, "POST", "/translate", body, timeout=timeout)
        except Exception as exc:  # the outcome under test, whatever it is
            results[k] = exc

    threads = [threading.Thread(target=run, args=(k, b), daemon=True) for k, b in enumerate(bodies)]
    for thread in threads:
        thread.start()
    return threads, results


def test_sigterm_finishes_requests_in_flight_refuses_new_ones_and_exits_0():
    server = Server(delay_s=0.5, drain_timeout_s="20", max_batch_sentences="1", max_wait_ms="0")
    try:
        server.wait_ready()
        bodies = [{"text": f"word{k} here", "source": "en", "target": "de"} for k in range(3)]
        threads, results = send_in_threads(server.port, bodies)
        wait_until(lambda: in_flight(server.port) == 3, what="three requests in flight")

        server.process.send_signal(signal.SIGTERM)

        def refused() -> bool:
            try:
                request(server.port, "GET", "/health/live", timeout=1)
                return False
            except OSError:
                return True

        wait_until(refused, timeout=10, what="the listening socket to close")  # no new connections
        for thread in threads:
            thread.join(30)
        assert server.process.wait(timeout=30) == 0
    finally:
        code, log = server.stop()
    assert code == 0
    # One batch at a time, half a second each: the last one finished well after the signal.
    assert [results[k] for k in range(3)] == [
        # The fake server's default model directories: models/en-de-align2 answers en-de.
        (200, json.dumps({"source": "en", "target": "de", "model": "en-de-align2",
                          "translations": [[{"text": f"HERE WORD{k}", "score": -0.5}]]}, separators=(",", ":")))
        for k in range(3)
    ]
    assert "draining: no new connections; finishing the requests in flight" in log
    assert "Traceback" not in log


def test_idle_connections_do_not_count_against_max_connections():
    # Open sockets do not count (uvicorn's own limit would count them: three silent ones would
    # lock every request out, /health/ready included, for as long as the client held them).
    server = Server(max_connections="2")
    idle = []
    try:
        server.wait_ready()
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(3)]
        assert request(server.port, "GET", "/health/ready")[0] == 200
        status, text = request(server.port, "POST", "/translate", {"text": "a dog", "source": "en", "target": "de"})
        assert (status, json.loads(text)["translations"][0][0]["text"]) == (200, "DOG A")
    finally:
        for sock in idle:
            sock.close()
        server.stop()


def test_a_drain_timeout_cuts_off_what_is_left_and_still_exits_0():
    server = Server(delay_s=30, drain_timeout_s="0.5", max_wait_ms="0")
    try:
        server.wait_ready()
        threads, results = send_in_threads(server.port, [{"text": "slow", "source": "en", "target": "de"}])
        wait_until(lambda: in_flight(server.port) == 1, what="a request in flight")
        started = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=20) == 0
        elapsed = time.monotonic() - started
        threads[0].join(10)
    finally:
        code, log = server.stop()
    assert code == 0
    assert elapsed < 20  # it did not wait for the 30 s batch
    assert results[0] == (
        503, '{"message":"the server shut down before this translation finished; retry","detail":[]}'
    )
    assert "timeout graceful shutdown exceeded" in log
    # The cut-off request's batch was stopped (nobody waits for it), not left computing.
    assert "exiting while phrasal-en-de-0 still computes a batch nobody waits for" not in log
    assert "Traceback" not in log


def test_a_model_that_fails_to_load_leaves_the_process_live_not_ready(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PHRASAL_")}
    env["PHRASAL_MODEL_DIRS"] = json.dumps([str(tmp_path / "missing")])
    env["PHRASAL_INFERENCE_PROCESS"] = "false"  # the load itself fails; tests/service/test_inference_process.py covers the child
    process = subprocess.Popen(
        [sys.executable, "-m", "service", "--host", "127.0.0.1", "--port", str(port)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        def settled() -> bool:
            assert process.poll() is None, process.stdout.read()
            try:
                status, body = request(port, "GET", "/health/ready", timeout=1)
            except OSError:
                return False
            return json.loads(body)["phase"] == "failed"

        wait_until(settled, timeout=60, what="the load to fail")
        assert request(port, "GET", "/health/live")[0] == 200
        status, body = request(port, "GET", "/health/ready")
        assert status == 503
        assert json.loads(body)["reason"].startswith("model load failed: ")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        log, _ = process.communicate(timeout=30)
    assert "model load failed; the service stays up but not ready" in log
