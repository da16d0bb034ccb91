"""Helpers for service tests (imported as ``tests.service.support``)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from fastapi import FastAPI
from fastapi.testclient import TestClient

from service.runtime.base import DecodingOptions
from service.settings import Settings
from service.translator import Translator
from testing.fake_runtime import FakeRuntime


@contextmanager
def serving(app: FastAPI, **client_options) -> Iterator[TestClient]:
    """A TestClient with the lifespan run AND the background model load finished (loaded or
    failed): what a client of a real server sees once /health/ready has settled."""
    with TestClient(app, **client_options) as client:
        client.portal.call(app.state.lifecycle.wait_loaded)
        yield client


def wait_until(predicate, timeout: float = 10.0, what: str = "condition") -> None:
    """Poll ``predicate`` until it holds; a bounded wait for another thread, not a timing check."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.002)


class Background:
    """Requests sent from threads, so that a test can hold them in the server and look around."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.threads: list[threading.Thread] = []
        self.responses: dict[int, object] = {}

    def post(self, body: dict, path: str = "/translate", **kwargs) -> int:
        key = len(self.threads)

        def run() -> None:
            self.responses[key] = self.client.post(path, json=body, **kwargs)

        thread = threading.Thread(target=run, daemon=True)
        self.threads.append(thread)
        thread.start()
        return key

    def join(self, timeout: float = 30.0) -> list:
        for thread in self.threads:
            thread.join(timeout)
            assert not thread.is_alive(), "a request never finished"
        return [self.responses[key] for key in range(len(self.threads))]


def queued(app: FastAPI) -> int:
    """Texts waiting in the app's batchers."""
    translator = app.state.lifecycle.translator
    return 0 if translator is None else translator.queued


def translated_by_fake(texts: list[str], fmt: str = "text", chunk: int = 50,
                       options: DecodingOptions = DecodingOptions(beam_size=1)) -> list:
    """Each text's n-best through a translator over the fake runtime (testing/fake_runtime.py:
    words reversed and upper-cased), greedy unless `options` say otherwise, `chunk` texts a request."""
    async def main():
        translator = Translator([FakeRuntime("en", "de", max_source_pieces=512)], Settings(max_wait_ms=1.0, max_segments=64))
        translator.start()
        try:
            answers = []
            for start in range(0, len(texts), chunk):
                answers += await translator.translate(texts[start:start + chunk], "en", "de", options,
                                                      fmt=fmt)
            return answers
        finally:
            await translator.stop()
    return asyncio.run(main())
