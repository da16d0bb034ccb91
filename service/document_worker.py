"""Translates the documents queued in the document store (service/document_store.py), one at a time
per server process, through the same translator as every request: a document's texts go in batches
of service/documents' BATCH beside the interactive requests, which the batcher interleaves.

The file is read and written in a worker thread (a large catalog's parsing would hold the event
loop); its texts are translated on the loop. A document the translator is too busy for waits and is
retried; one that cannot be translated (malformed, no such pair) is left failed with the reason; at
shutdown the document in hand is queued again for the next start (or another process) to take up.
"""
from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import CancelledError as FutureCancelled
from dataclasses import replace

from service.document_store import Claim, DocumentStore
from service.documents import Failed, Refused, Translate, translate_document
from service.errors import DeadlineExceeded, Rejected, RequestError
from service.lifecycle import Lifecycle
from service.metrics import Metrics
from service.protection.placeholders import PLACEHOLDER_STYLES
from service.translator import Translator

log = logging.getLogger("service")

POLL_S = 2.0            # how often the store is looked at for documents other processes took in
LOADING_POLL_S = 0.1    # how often readiness is looked at while models load: a restart takes up its queue at once
PURGE_EVERY_S = 600.0
BUSY_WAIT_S = 1.0       # after a "too busy" from the translator, when it names no time
LONGEST_BUSY_S = 600.0  # a translator busy (or restarting) this long: the document goes back to the queue
INTERNAL_FAILURE = "translation failed; details are in the server log"  # what a client is told of a bug


class Stopped(Exception):
    """The server stops, or its translator stays busy: the document goes back to the queue."""


def in_process(translator: Translator, loop: asyncio.AbstractEventLoop, claim: Claim,
               stopping: asyncio.Event) -> Translate:
    """documents.Translate over the translator in this process, for a worker thread: each call runs
    on `loop` and waits for it. Busy answers (a full queue, a model restarting) are waited out, for
    LONGEST_BUSY_S at most; the translator's refusals are documents.Refused naming the text or the
    request's field, and so is a batch the model did not finish within the request deadline (sent
    again text by text; a text alone that does not is left untranslated, named)."""
    document = claim.document
    options = replace(translator.defaults, n_best=1, alignment="none")

    def translate(texts: list[str], source: str, target: str, fmt: str) -> list[str]:
        busy_since = time.monotonic()
        while True:
            if stopping.is_set():
                raise Stopped()
            future = asyncio.run_coroutine_threadsafe(
                translator.translate(texts, source, target, options, fmt, (), document.glossary, PLACEHOLDER_STYLES,
                                     document.model), loop)
            try:
                served = future.result()
            except RequestError as error:
                where = "text" if error.field == "text" else error.field
                raise Refused(error.message, f"{where}.{error.index}" if error.index is not None else where,
                              error.kind) from None
            except DeadlineExceeded as slow:
                raise Refused(f"not translated within the request deadline ({slow.message})",
                              "text" if len(texts) > 1 else "text.0") from None
            except Rejected as busy:
                if stopping.is_set() or time.monotonic() - busy_since > LONGEST_BUSY_S:
                    raise Stopped() from None
                time.sleep(busy.retry_after or BUSY_WAIT_S)
                continue
            except FutureCancelled:
                raise Stopped() from None
            return [nbest[0].translation.text for nbest in served]

    return translate


class DocumentWorker:
    def __init__(self, store: DocumentStore, lifecycle: Lifecycle, metrics: Metrics) -> None:
        self.store, self.lifecycle, self.metrics = store, lifecycle, metrics
        metrics.documents_waiting.set_function(store.waiting)
        self._wake = asyncio.Event()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._purged = 0.0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="documents")

    def wake(self) -> None:
        """A document was queued here: look now rather than at the next poll."""
        self._wake.set()

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass

    async def _idle(self, seconds: float = POLL_S) -> None:
        try:
            await asyncio.wait_for(self._wake.wait(), seconds)
        except asyncio.TimeoutError:
            pass
        self._wake.clear()

    async def _run(self) -> None:
        while not self._stopping.is_set():
            translator = self.lifecycle.translator
            if translator is None or self.lifecycle.phase != "ready":
                await self._idle(LOADING_POLL_S)
                continue
            if not self.store.exists():
                await self._idle()
                continue
            try:
                if time.monotonic() - self._purged > PURGE_EVERY_S:
                    self._purged = time.monotonic()
                    await asyncio.to_thread(self.store.purge)
                claim = await asyncio.to_thread(self.store.claim)
            except Exception:  # noqa: BLE001 - a store that cannot be read now is tried again
                log.exception("the document store cannot be read")
                await self._idle()
                continue
            if claim is None:
                await self._idle()
                continue
            await self._translate(claim, translator)

    async def _translate(self, claim: Claim, translator: Translator) -> None:
        document, loop = claim.document, asyncio.get_running_loop()
        translate = in_process(translator, loop, claim, self._stopping)

        def detect(texts: list[str]) -> str | None:
            found = translator.detector.detect(" ".join(texts)[:4000])
            return found.language if found is not None else None

        def work() -> None:
            started = time.monotonic()
            try:
                done = translate_document(document.name, claim.input, translate, document.source, document.target,
                                          detect=detect, progress=lambda k, n: self.store.progress(claim, k, n))
            except Stopped:
                self.store.release(claim)
                return
            except Failed as failed:
                failure = str(failed)
            except Exception:  # noqa: BLE001 - the document fails, the worker goes on
                log.exception("document %s failed", document.id)
                failure = INTERNAL_FAILURE
            else:
                if self.store.finish(claim, done.data, done.count, done.characters, done.refused):
                    self.metrics.documents.labels(outcome="done").inc()
                    self.metrics.document_seconds.observe(time.monotonic() - started)
                return
            if self.store.fail(claim, failure):
                self.metrics.documents.labels(outcome="failed").inc()

        try:
            await asyncio.to_thread(work)
        except asyncio.CancelledError:
            # the thread finishes its batch and stops; the document waits for the next worker
            await asyncio.to_thread(self.store.release, claim)
            raise
