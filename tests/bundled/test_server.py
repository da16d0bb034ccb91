"""The real server with the real backend: ``python -m service`` under uvicorn on a free port, the
torch backend serving models/en-de from its inference child process, as `make serve` runs it.
Its answers are the pins (tests/bundled/en_de_expected.json), /metrics counts a request exactly,
and SIGTERM with requests in flight answers every one of them and exits 0."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from model.text.tokenizer import Tokenizer
from tests.bundled.expectations import MODEL_DIR, REPO, cases_by_id, load_expected, within
from tests.service.support import wait_until
from tests.service.test_server_process import free_port, request, send_in_threads

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

EXPECTED = load_expected()
CASES = cases_by_id(EXPECTED)
# Every field that decides what the server serves (the rest are `make serve`'s defaults);
# float32 because the pins are (tests/bundled/expectations.py isolated_settings).
REAL_BACKEND = {"backend": "torch", "device": "cpu", "model_dirs": json.dumps([str(MODEL_DIR)]), "cpu_quantization": "none"}
# Starting the interpreter, the inference child and the model's warm-up on a busy 2-core box.
READY_TIMEOUT_S = 120
# Client-side patience for one translation; what a busy machine may need, not an expectation.
CLIENT_TIMEOUT_S = 600


class RealServer:
    """``python -m service`` with no PHRASAL_* variable but REAL_BACKEND and `settings`. Its log
    goes to a file: a pipe nobody reads would fill up with access-log lines and block the server."""

    def __init__(self, log_path: Path, **settings: str) -> None:
        self.port = free_port()
        self.log_path = log_path
        env = {k: v for k, v in os.environ.items() if not k.startswith("PHRASAL_")}
        env.update({f"PHRASAL_{k.upper()}": v for k, v in {**REAL_BACKEND, **settings}.items()})
        with open(log_path, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "service", "--host", "127.0.0.1", "--port", str(self.port)],
                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
            )

    def wait_ready(self) -> None:
        def ready() -> bool:
            assert self.process.poll() is None, self.log()
            try:
                status, body = request(self.port, "GET", "/health/ready", timeout=1)
            except OSError:
                return False
            assert json.loads(body)["phase"] != "failed", body  # a model that cannot load fails now
            return status == 200

        wait_until(ready, timeout=READY_TIMEOUT_S, what="the server to be ready")

    def log(self) -> str:
        return self.log_path.read_text()

    def terminate(self, timeout: float = 120) -> tuple[int, str]:
        """SIGTERM (the inference child stops with its parent); the exit code and the log."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode, self.log()


def start(log_path: Path, **settings: str) -> RealServer:
    server = RealServer(log_path, **settings)
    try:
        server.wait_ready()
    except BaseException:
        server.terminate(timeout=10)
        raise
    return server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    # A generous deadline: a shared 2-core CI box may take longer than the default 30 s for the
    # 200-sentence request, and what is tested here is the answer, not the speed.
    server = start(tmp_path_factory.mktemp("server") / "log", request_timeout_s="600")
    yield server
    code, log = server.terminate()
    assert code == 0, log
    assert "ready: serving en-de as en-de (torch)" in log
    assert "Traceback" not in log


def translations(port: int, body: dict) -> list:
    status, text = request(port, "POST", "/translate", body, timeout=CLIENT_TIMEOUT_S)
    assert status == 200, text
    return json.loads(text)["translations"]


def scrape(port: int) -> dict[tuple[str, frozenset], float]:
    """Every sample of /metrics by (name, labels)."""
    status, text = request(port, "GET", "/metrics")
    assert status == 200
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_ready_on_the_bundled_model(server):
    assert request(server.port, "GET", "/health/ready") == (200, '{"status":"ok","phase":"ready","pairs":["en-de"]}')


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_translations_and_alignments_are_the_pinned_ones(server, case):
    assert translations(server.port, case["request"]) == within(case["translations"])


def test_metrics_count_one_request_exactly(server):
    case = EXPECTED["cases"][0]  # two texts, one request
    texts = case["request"]["text"]
    tokenizer = Tokenizer(MODEL_DIR / "spm.model")
    pair, model, backend = ("pair", "en-de"), ("model", MODEL_DIR.name), ("backend", "torch")
    counters = {
        ("phrasal_request_duration_seconds_count", frozenset({("route", "/translate"), ("status", "200")})): 1,
        ("phrasal_translated_segments_total", frozenset({pair, model})): len(texts),
        ("phrasal_source_tokens_total", frozenset({pair, model})): sum(map(len, tokenizer.encode_batch(texts))),
        ("phrasal_generated_tokens_total", frozenset({pair, model})):
            sum(len(ids) for ids in tokenizer.encode_batch([nbest[0]["text"] for nbest in case["translations"]])),
        # One batch (both texts of the request), computed by the torch backend, not a fake.
        ("phrasal_compute_duration_seconds_count", frozenset({pair, model, backend})): 1,
        ("phrasal_rejections_total", frozenset({("reason", "invalid_request")})): 0,
    }
    before = scrape(server.port)
    assert translations(server.port, case["request"]) == within(case["translations"])
    after = scrape(server.port)
    assert {key: after[key] - before.get(key, 0.0) for key in counters} == counters
    assert after[("phrasal_requests_in_flight", frozenset({("route", "/translate")}))] == 0


def accepted(port: int) -> tuple[int, int]:
    """(/translate requests in flight, /translate requests answered), from one scrape: the event
    loop renders /metrics, so no request is counted in both or in neither."""
    samples = scrape(port)
    answered = sum(value for (name, labels), value in samples.items()
                   if name == "phrasal_request_duration_seconds_count" and ("route", "/translate") in labels)
    return int(samples[("phrasal_requests_in_flight", frozenset({("route", "/translate")}))]), int(answered)


def test_sigterm_answers_every_request_in_flight_with_its_translation_and_exits_0(tmp_path):
    # One text a batch: eight requests of two texts are sixteen decodes one after another, so
    # when all eight are in, the last ones still wait for most of them. Deadlines far away: a
    # busy machine must not turn this into a deadline test.
    server = start(tmp_path / "log", max_batch_sentences="1", max_wait_ms="0", request_timeout_s="600",
                   drain_timeout_s="600")
    case = EXPECTED["cases"][0]  # README's first example
    seen: list[tuple[int, int]] = []
    try:
        threads, results = send_in_threads(server.port, [case["request"]] * 8, timeout=CLIENT_TIMEOUT_S)

        def all_in() -> bool:
            time.sleep(0.02)  # not wait_until's 2 ms: the scrapes share the two cores with the decodes
            seen.append(accepted(server.port))
            return sum(seen[-1]) == 8

        wait_until(all_in, timeout=60, what="eight requests accepted")
        server.process.send_signal(signal.SIGTERM)
        for thread in threads:
            thread.join(CLIENT_TIMEOUT_S)
        assert server.process.wait(timeout=60) == 0
    finally:
        code, log = server.terminate()
    assert code == 0
    in_flight_at_signal, _ = seen[-1]
    assert in_flight_at_signal > 0, seen  # else this test would not test draining
    answers = [results[k] for k in range(8)]  # (status, body), or the exception a request raised
    assert [answer[0] if isinstance(answer, tuple) else answer for answer in answers] == [200] * 8, answers
    assert [json.loads(body)["translations"] for _, body in answers] == [within(case["translations"])] * 8
    assert "draining: no new connections; finishing the requests in flight" in log
    assert "ready: serving en-de as en-de (torch)" in log
    assert "Traceback" not in log
