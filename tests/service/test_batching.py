"""Dynamic batching across requests (service/batcher.py), with the FakeRuntime.

A gate holds the worker inside a model call while other requests queue behind it, so which texts
share a batch is decided by the test, not by timing."""

from __future__ import annotations

import asyncio
import json
import logging
import threading

from prometheus_client.parser import text_string_to_metric_families
import pytest

from service.app import create_app
from service.batcher import BatchLimits, MicroBatcher
from service.runtime.base import DecodingOptions
from service.settings import Settings
from testing.fake_runtime import FakeRuntime
from tests.service.support import Background, queued, serving, wait_until

BASE = {"source": "en", "target": "de"}


def gated(runtime: FakeRuntime | None = None, **overrides):
    gate = threading.Event()
    runtime = runtime or FakeRuntime()
    runtime.gate = gate
    settings = Settings(**{"max_segments": 8, "max_chars": 200, "max_wait_ms": 0.0, **overrides})
    return create_app(settings, runtime_factory=lambda s: [runtime]), runtime, gate


def hold_the_worker(client, runtime: FakeRuntime, background: Background) -> None:
    """Send one request and wait until the worker is inside its model call (behind the gate)."""
    background.post({**BASE, "text": "hold"})
    assert runtime.entered.acquire(timeout=10)


def queue_in_order(app, background: Background, bodies: list[dict]) -> None:
    """Queue the bodies one after another, each fully queued before the next is sent."""
    for body in bodies:
        before = queued(app)
        texts = body["text"] if isinstance(body["text"], list) else [body["text"]]
        background.post({**BASE, **body})
        wait_until(lambda: queued(app) == before + sum(1 for t in texts if t.strip()), what="texts queued")


def alone(bodies: list[dict]) -> list[dict]:
    """What each body gets when it is the only request the server ever sees."""
    out = []
    for body in bodies:
        with serving(create_app(Settings(max_segments=8, max_chars=200), runtime_factory=lambda s: [FakeRuntime()])) as c:
            response = c.post("/translate", json={**BASE, **body})
            assert response.status_code == 200, response.text
            out.append(response.json())
    return out


def test_concurrent_requests_get_what_they_get_alone_in_shared_batches_by_options():
    bodies = [
        {"text": ["a b c", "d e"]},
        {"text": "x y z w v u", "beam_size": 3, "n_best": 2},
        {"text": ["p q", "", "r s t"], "alignment": "token"},
        {"text": "m n", "beam_size": 3, "n_best": 2},
        {"text": ["long sentence of seven words here ok", "s"]},
    ]
    app, runtime, gate = gated()
    with serving(app) as client:
        background = Background(client)
        hold_the_worker(client, runtime, background)
        queue_in_order(app, background, bodies)
        gate.set()
        responses = background.join()
    assert [r.status_code for r in responses] == [200] * 6
    assert [r.json() for r in responses[1:]] == alone(bodies)

    # The Translator names the alignment method the runtime gives (the fake's: "attention").
    default = DecodingOptions(beam_size=5, n_best=1, alignment_method="attention")
    # One call per options, oldest group first; in a call the oldest text leads and the others
    # follow by closeness in length (fake pieces: 3, then 2, 1 and 10).
    assert [(texts, options) for texts, options in runtime.calls[1:]] == [
        (["a b c", "d e", "s", "long sentence of seven words here ok"], default),
        (["x y z w v u", "m n"], DecodingOptions(beam_size=3, n_best=2, alignment_method="attention")),
        (["p q", "r s t"], DecodingOptions(beam_size=5, n_best=1, alignment="token", alignment_method="attention")),
    ]


def test_batches_respect_max_sentences_and_max_padded_tokens():
    # Pieces: a=1, "b c d e f"=5, g=1, "h i j k l"=5, m=1. Budget: 3 texts, 4 padded tokens.
    app, runtime, gate = gated(max_batch_sentences=3, max_batch_tokens=4)
    texts = ["a", "b c d e f", "g", "h i j k l", "m"]
    with serving(app) as client:
        background = Background(client)
        hold_the_worker(client, runtime, background)
        queue_in_order(app, background, [{"text": t} for t in texts])
        gate.set()
        assert [r.status_code for r in background.join()] == [200] * 6
        metrics = client.get("/metrics").text
    # A text over the token budget on its own still runs, alone.
    assert [texts for texts, _ in runtime.calls] == [["hold"], ["a", "g", "m"], ["b c d e f"], ["h i j k l"]]
    sizes = histogram(metrics, "phrasal_batch_size", {"pair": "en-de"})
    assert (sizes["count"], sizes["sum"]) == (4, 6)
    tokens = histogram(metrics, "phrasal_batch_tokens", {"pair": "en-de"})
    assert tokens["sum"] == 1 + 3 + 5 + 5  # texts x longest text, per call


def test_batching_off_runs_one_text_per_call():
    app, runtime, gate = gated(max_batch_sentences=1)
    with serving(app) as client:
        background = Background(client)
        hold_the_worker(client, runtime, background)
        queue_in_order(app, background, [{"text": ["a", "b"]}, {"text": "c"}])
        gate.set()
        responses = background.join()
    assert [r.status_code for r in responses] == [200] * 3
    assert [texts for texts, _ in runtime.calls] == [["hold"], ["a"], ["b"], ["c"]]
    assert [[h["text"] for h in nbest] for nbest in responses[1].json()["translations"]] == [["A"], ["B"]]


def test_a_text_the_runtime_rejects_fails_only_its_own_request():
    # The fake reads at most 3 pieces; "a b c d" is 4.
    app, runtime, gate = gated(FakeRuntime(max_source_pieces=3))
    with serving(app) as client:
        background = Background(client)
        hold_the_worker(client, runtime, background)
        queue_in_order(app, background, [{"text": ["a b", "a b c d"]}, {"text": "c d"}])
        gate.set()
        held, rejected, fine = background.join()
    assert held.status_code == 200
    assert rejected.status_code == 422
    assert rejected.json()["message"] == "text.1: has 4 source tokens; this model reads at most 3"
    assert fine.status_code == 200
    assert fine.json()["translations"] == [[{"text": "D C", "score": -0.5}]]
    # The shared call failed; it ran again without the request at fault.
    assert [texts for texts, _ in runtime.calls] == [["hold"], ["a b", "c d", "a b c d"], ["c d"]]


class FailsOnce(FakeRuntime):
    def translate(self, texts, options):
        out = super().translate(texts, options)
        if len(self.calls) == 2:
            raise RuntimeError("device lost: secret detail")
        return out


def test_a_failed_batch_fails_its_requests_and_the_worker_goes_on(caplog):
    app, runtime, gate = gated(FailsOnce())
    with caplog.at_level(logging.ERROR, logger="service"), serving(app) as client:
        background = Background(client)
        hold_the_worker(client, runtime, background)
        queue_in_order(app, background, [{"text": "a"}, {"text": "b"}])
        gate.set()
        held, first, second = background.join()
        after = client.post("/translate", json={**BASE, "text": "c"})
    assert held.status_code == 200
    for response in (first, second):
        assert response.status_code == 500
        assert "secret" not in response.text
    assert after.status_code == 200
    assert "device lost: secret detail" in caplog.text


def test_a_client_that_disconnects_has_its_queued_texts_dropped():
    app, runtime, gate = gated()
    with serving(app) as client:
        background = Background(client)
        hold_the_worker(client, runtime, background)
        body = json.dumps({**BASE, "text": ["gone one", "gone two"]}).encode()

        async def disconnecting_client() -> list[dict]:
            left = asyncio.Event()
            messages = [{"type": "http.request", "body": body, "more_body": False}]
            sent = []

            async def receive():
                if messages:
                    return messages.pop()
                await left.wait()
                return {"type": "http.disconnect"}

            async def send(message):
                sent.append(message)

            scope = {
                "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                "scheme": "http", "path": "/translate", "raw_path": b"/translate", "query_string": b"",
                "root_path": "", "headers": [(b"content-type", b"application/json")],
                "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 80),
            }
            task = asyncio.ensure_future(app(scope, receive, send))
            while queued(app) != 2:
                await asyncio.sleep(0.002)
            left.set()
            await task
            return sent

        sent = client.portal.call(disconnecting_client)
        assert queued(app) == 0  # dropped at once, while the worker is still busy
        gate.set()
        assert [r.status_code for r in background.join()] == [200]
        metrics = client.get("/metrics").text
    assert sent[0]["status"] == 499
    assert [texts for texts, _ in runtime.calls] == [["hold"]]  # the texts never ran
    assert sample(metrics, "phrasal_rejections_total", {"reason": "client_disconnected"}) == 1


def test_an_idle_worker_waits_for_company_until_the_batch_is_full():
    runtime = FakeRuntime()

    async def scenario():
        batcher = MicroBatcher(runtime, BatchLimits(max_sentences=2, max_wait_s=60.0))
        batcher.start()
        try:
            first = batcher.submit(["a b"], [2], DecodingOptions())
            await asyncio.sleep(0.05)
            calls_while_alone = len(runtime.calls)  # the worker waits: max_wait_s is a minute
            second = batcher.submit(["c"], [1], DecodingOptions())
            results = await asyncio.wait_for(asyncio.gather(first.future, second.future), 10)
        finally:
            await batcher.stop()
        return calls_while_alone, results

    calls_while_alone, (first, second) = asyncio.run(scenario())
    assert calls_while_alone == 0
    assert [texts for texts, _ in runtime.calls] == [["a b", "c"]]  # full: sent without waiting longer
    assert [[t.text for t in nbest] for nbest in first] == [["B A"]]
    assert [[t.text for t in nbest] for nbest in second] == [["C"]]


def sample(text: str, name: str, labels: dict[str, str]) -> float:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    raise KeyError(name)


def histogram(text: str, name: str, labels: dict[str, str]) -> dict[str, float]:
    return {
        "count": sample(text, f"{name}_count", labels),
        "sum": sample(text, f"{name}_sum", labels),
    }


@pytest.mark.parametrize("lone, overlapping", [
    ((["a"], ["b"]), (["c"], ["d"])),
    # Texts of one request arriving together are not company: the batch they make after a wait
    # counts as lonely (the benchmark's one client sending 32 texts a request paid 5 ms a request).
    ((["a", "b", "c"], ["d", "e"]), (["f", "g"], ["h", "i"])),
], ids=["one text a request", "many texts a request"])
def test_a_lone_client_stops_paying_the_wait_and_overlapping_clients_turn_it_back_on(lone, overlapping):
    runtime = FakeRuntime()

    async def scenario():
        batcher = MicroBatcher(runtime, BatchLimits(max_sentences=8, max_wait_s=0.02))
        batcher.start()
        skips = []
        try:
            for texts in lone:  # one client at a time: the first waits in vain
                await asyncio.wait_for(batcher.submit(texts, [1] * len(texts), DecodingOptions()).future, 10)
                skips.append(batcher._skip_waits)
            both = [batcher.submit(texts, [1] * len(texts), DecodingOptions()) for texts in overlapping]
            await asyncio.wait_for(asyncio.gather(*(job.future for job in both)), 10)
            skips.append(batcher._skip_waits)
        finally:
            await batcher.stop()
        return skips

    assert asyncio.run(scenario()) == [15, 14, 0]
    assert [texts for texts, _ in runtime.calls] == [*lone, overlapping[0] + overlapping[1]]


def test_each_further_wait_in_vain_doubles_the_batches_that_skip_it():
    # A lone client (one request at a time): the first request waits in vain, the next 15 start at
    # once, the 17th waits again and 30 skip; overlapping requests turn waiting back on, and the
    # next wait in vain starts over at 15.
    runtime = FakeRuntime()

    async def scenario():
        batcher = MicroBatcher(runtime, BatchLimits(max_sentences=8, max_wait_s=0.01))
        batcher.start()
        skips = []
        try:
            for index in range(18):
                await asyncio.wait_for(batcher.submit([f"t{index}"], [1], DecodingOptions()).future, 10)
                skips.append(batcher._skip_waits)
            both = [batcher.submit([text], [1], DecodingOptions()) for text in ("x", "y")]
            await asyncio.wait_for(asyncio.gather(*(job.future for job in both)), 10)
            skips.append(batcher._skip_waits)
            await asyncio.wait_for(batcher.submit(["z"], [1], DecodingOptions()).future, 10)
            skips.append(batcher._skip_waits)
        finally:
            await batcher.stop()
        return skips

    assert asyncio.run(scenario()) == [15, *range(14, -1, -1), 30, 29, 0, 15]
