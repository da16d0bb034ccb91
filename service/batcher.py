"""Dynamic batching across requests: one ``MicroBatcher`` per loaded runtime (language pair).

Requests put their texts in a bounded queue; worker coroutines take batches out of it and run
them on the runtime in a dedicated thread, off the event loop. A batch holds texts with the SAME
decoding options (beam size, n-best, alignment: a model call takes one set), at most
``max_sentences`` of them and at most ``max_tokens`` padded source tokens (texts x longest text,
what a padded batch costs). Its first text is always the oldest one waiting, so nothing starves;
the rest are the waiting texts closest to it in length, so little of the batch is padding.

An idle worker that finds a batch not yet full waits up to ``max_wait_s`` after the oldest
text arrived for others to join; a busy worker makes texts wait anyway, so under load batches
fill up by themselves and the wait costs nothing. When a wait brings no other request (one client
at a time, with one text or many a request), the next idle batches skip it, twice as many after
each further wait in vain, so a lone client pays ``max_wait_s`` on a few requests in a thousand
rather than on every one (or on one in 16, which its 95th percentile latency would show).

Workers per runtime (``worker_threads``): one is right for one GPU. A GPU runs one batch's kernels
at a time anyway; a second thread would only interleave two batches' kernels (neither finishes
sooner), hold two sets of activations, and contend for the GIL between kernel launches. Under
load the single worker's batches simply grow. More than one can pay on a CPU with many cores and
few intra-op threads, or to overlap the Python half of a launch-bound tiny model with the GPU.

Each request's texts form a ``Job`` whose future resolves to its n-best lists in order, however
its texts were split across batches. Dropping a job (client gone, deadline passed) removes its
waiting texts from the queue. A running batch is asked to stop once every job in it is done
(``TranslationRuntime.translate_until``): backends that can stop between decoding steps do, and
free the model for the requests still waiting (counted in ``phrasal_cancelled_batches_total``).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from service.errors import NotReady, QueueFull, TranslationFailed
from service.metrics import Metrics
from service.runtime.base import (
    BatchCancelled,
    DecodingOptions,
    RuntimeUnavailable,
    TextRejected,
    Translation,
    TranslationRuntime,
)

log = logging.getLogger("service")


# After a wait for company that brought none, this many idle batches start without waiting; the
# next one waits again, to notice when clients overlap once more. Each further wait in vain in a
# row doubles the count, up to _MOST_SKIPS (requests of clients that overlap meanwhile still
# share batches: they queue while a batch runs, and such a batch turns waiting back on).
_SKIPS_AFTER_LONELY_WAIT = 15
_MOST_SKIPS = _SKIPS_AFTER_LONELY_WAIT << 6


class TextRefused(Exception):
    """The runtime refused text ``slot`` of a job (``TextRejected``): the client's doing."""

    def __init__(self, slot: int, reason: str) -> None:
        super().__init__(reason)
        self.slot = slot
        self.reason = reason


class Job:
    """One request's texts for one runtime. ``future`` resolves to one n-best list per text."""

    def __init__(self, texts: Sequence[str], options: DecodingOptions, loop: asyncio.AbstractEventLoop) -> None:
        self.options = options
        self.results: list[list[Translation] | None] = [None] * len(texts)
        self.remaining = len(texts)
        self.future: asyncio.Future[list[list[Translation]]] = loop.create_future()
        self.started = False  # some text reached a worker

    @property
    def done(self) -> bool:
        return self.future.done()

    def deliver(self, slot: int, nbest: list[Translation]) -> None:
        if self.done:
            return  # dropped while its batch ran
        self.results[slot] = nbest
        self.remaining -= 1
        if self.remaining == 0:
            self.future.set_result(self.results)  # type: ignore[arg-type]  # all filled

    def fail(self, error: BaseException) -> None:
        if not self.done:
            self.future.set_exception(error)
            self.future.exception()  # retrieved: no "never retrieved" warning if nobody awaits


@dataclass(eq=False)  # identity: two equal texts are two items
class _Item:
    job: Job
    slot: int
    text: str
    tokens: int
    seq: int
    enqueued: float = field(default_factory=time.perf_counter)


class _WorkerThread:
    """One daemon thread that runs a worker's model calls, always the same one (CUDA streams and
    torch's thread-local state stay put). A daemon, unlike a ThreadPoolExecutor's threads, so
    that a batch still running when the drain timeout expires cannot hold the process open."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def run(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._jobs.put((fn, args, loop, future))
        return future

    def close(self) -> None:
        self._jobs.put(None)

    def join(self, timeout: float) -> bool:
        """Wait for the thread to end (it ends after the call it is running); True if it did."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, args, loop, future = job
            try:
                outcome, failed = fn(*args), False
            except BaseException as exc:  # handed to the awaiting coroutine, like an executor
                outcome, failed = exc, True
            try:
                loop.call_soon_threadsafe(_settle, future, outcome, failed)
            except RuntimeError:  # the loop is closed: nobody is waiting any more
                pass


def _settle(future: asyncio.Future[Any], outcome: Any, failed: bool) -> None:
    if future.done():  # the awaiting worker was cancelled (shutdown)
        return
    if failed:
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


@dataclass(frozen=True)
class BatchLimits:
    max_sentences: int = 64
    max_tokens: int = 8192
    max_wait_s: float = 0.005
    max_queue: int = 1024
    workers: int = 1
    retry_after_s: int = 1


class MicroBatcher:
    def __init__(self, runtime: TranslationRuntime, limits: BatchLimits, metrics: Metrics | None = None,
                 model: str | None = None) -> None:
        """``model``: the served model's name (service/catalog.py), a metric label beside the pair;
        None: the pair's name."""
        self.runtime = runtime
        self.limits = limits
        self.metrics = metrics
        self.pair = runtime.pair
        self.model = model if model is not None else self.pair
        self._labels = {"pair": self.pair, "model": self.model}
        self._pending: dict[DecodingOptions, list[_Item]] = {}  # per options, oldest first
        self._queued = 0
        self._seq = itertools.count()
        self._arrived = asyncio.Event()
        self._workers: list[asyncio.Task[None]] = []
        self._threads: list[_WorkerThread] = []
        self._closed = False
        self._skip_waits = 0  # see _adapt
        self._lonely_waits = 0  # waits in vain in a row

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the workers; call from the event loop that will submit."""
        self._threads = [_WorkerThread(f"phrasal-{self.model}-{i}") for i in range(self.limits.workers)]
        self._workers = [
            asyncio.create_task(self._work(thread), name=f"batcher-{self.model}-{i}")
            for i, thread in enumerate(self._threads)
        ]

    async def stop(self) -> None:
        """Refuse new work, fail what waits, stop the workers. A batch running in a thread is
        left to finish there (a thread cannot be interrupted); its results are thrown away."""
        self._closed = True
        for items in self._pending.values():
            for item in items:
                item.job.fail(NotReady("the server is shutting down", retry_after=1))
        self._pending.clear()
        self._set_queued(0)
        for task in self._workers:
            task.cancel()
        for task in self._workers:
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._workers = []
        for thread in self._threads:
            thread.close()
        # An idle thread ends at once. Let it end before the interpreter does: a thread that ran
        # torch code and is torn down during process exit can abort it ("terminate called ...").
        for thread in self._threads:
            await asyncio.to_thread(thread.join, 1.0)
        self._threads = []

    # -- the request side ------------------------------------------------------------------

    @property
    def queued(self) -> int:
        """Texts waiting for a worker (not those in a running batch)."""
        return self._queued

    def submit(self, texts: Sequence[str], tokens: Sequence[int], options: DecodingOptions) -> Job:
        """Queue ``texts`` (non-empty, with their source token counts) at once, or raise
        ``QueueFull`` at once: a request never waits for room. An empty queue takes any request."""
        if self._closed:
            raise NotReady("the server is shutting down", retry_after=1)
        # A request's segments may outnumber the queue (a help text of many lines, an ICU message's
        # branches): an idle queue takes it whole, which it could otherwise never be.
        if self._queued and self._queued + len(texts) > self.limits.max_queue:
            raise QueueFull(
                f"server busy: {self._queued} texts queued for {self.model} (limit {self.limits.max_queue}); retry later",
                retry_after=self.limits.retry_after_s,
            )
        job = Job(texts, options, asyncio.get_running_loop())
        now = time.perf_counter()
        group = self._pending.setdefault(options, [])
        for slot, (text, count) in enumerate(zip(texts, tokens, strict=True)):
            group.append(_Item(job, slot, text, count, next(self._seq), now))
        self._set_queued(self._queued + len(texts))
        self._arrived.set()
        return job

    def drop(self, job: Job) -> bool:
        """Take ``job``'s waiting texts out of the queue and cancel its future (if not done).
        Returns whether any of its texts had reached a worker."""
        removed = 0
        for options in list(self._pending):
            items = self._pending[options]
            kept = [item for item in items if item.job is not job]
            removed += len(items) - len(kept)
            if kept:
                self._pending[options] = kept
            else:
                del self._pending[options]
        if removed:
            self._set_queued(self._queued - removed)
        if not job.done:
            job.future.cancel()
        return job.started

    @functools.cached_property
    def _series(self) -> dict[str, Any]:
        """This model's series of the pair-and-model metrics, looked up once: prometheus_client's
        labels() costs a few µs a call, and queue_seconds took one a segment."""
        names = ("queue_depth", "queue_seconds", "cancelled_batches", "batch_size", "batch_tokens", "segments",
                 "source_tokens", "generated_tokens")
        return {name: getattr(self.metrics, name).labels(**self._labels) for name in names}

    def _set_queued(self, value: int) -> None:
        self._queued = value
        if self.metrics is not None:
            self._series["queue_depth"].set(value)

    # -- the worker side -------------------------------------------------------------------

    async def _work(self, thread: _WorkerThread) -> None:
        while True:
            options, items = await self._next_batch()
            try:
                await self._run(thread, options, items)
            except asyncio.CancelledError:
                for item in items:
                    item.job.fail(NotReady("the server is shutting down", retry_after=1))
                raise
            except Exception:  # never let a worker die: the queue would stall
                log.exception("batch worker for %s failed", self.pair)
                for item in items:
                    item.job.fail(TranslationFailed())

    async def _next_batch(self) -> tuple[DecodingOptions, list[_Item]]:
        limits = self.limits
        waited = False
        while True:
            if not self._pending:
                self._arrived.clear()
                await self._arrived.wait()
                continue
            # The group holding the oldest waiting text goes first.
            options, items = min(self._pending.items(), key=lambda kv: kv[1][0].seq)
            full = len(items) >= limits.max_sentences or sum(i.tokens for i in items) >= limits.max_tokens
            wait = items[0].enqueued + limits.max_wait_s - time.perf_counter()
            if full or wait <= 0 or (self._skip_waits and not waited):
                batch = self._take(options)
                self._adapt(len({id(item.job) for item in batch}), waited)
                return options, batch
            waited = True
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), wait)
            except asyncio.TimeoutError:  # not the builtin before Python 3.11
                pass

    def _adapt(self, requests: int, waited: bool) -> None:
        """Waiting for company pays only when company comes. After a wait in which nobody joined
        (one client at a time, say, with one text or many a request), the next
        ``_SKIPS_AFTER_LONELY_WAIT`` idle batches start at once, twice as many after each further
        such wait in a row (at most ``_MOST_SKIPS``); a batch with the texts of more than one
        request (concurrent clients) turns waiting back on."""
        if requests > 1:
            self._skip_waits = self._lonely_waits = 0
        elif waited:
            self._lonely_waits += 1
            self._skip_waits = min(_SKIPS_AFTER_LONELY_WAIT << min(self._lonely_waits - 1, 6), _MOST_SKIPS)
        elif self._skip_waits:
            self._skip_waits -= 1

    def _take(self, options: DecodingOptions) -> list[_Item]:
        """The oldest waiting text, plus the waiting texts closest to it in length that fit."""
        limits = self.limits
        waiting = self._pending.pop(options)
        anchor = waiting[0]
        batch, longest = [anchor], anchor.tokens
        for item in sorted(waiting[1:], key=lambda i: (abs(i.tokens - anchor.tokens), i.seq)):
            if len(batch) == limits.max_sentences:
                break
            padded = max(longest, item.tokens) * (len(batch) + 1)
            if padded > limits.max_tokens:
                continue  # a shorter text further down may still fit
            batch.append(item)
            longest = max(longest, item.tokens)
        chosen = {id(item) for item in batch}
        rest = [item for item in waiting if id(item) not in chosen]
        if rest:
            self._pending[options] = rest
        self._set_queued(self._queued - len(batch))
        return batch

    async def _run(self, thread: _WorkerThread, options: DecodingOptions, items: list[_Item]) -> None:
        now = time.perf_counter()
        queue_seconds = self._series["queue_seconds"] if self.metrics is not None else None
        for item in items:
            item.job.started = True
            if queue_seconds is not None:
                queue_seconds.observe(now - item.enqueued)
        while True:
            items = [item for item in items if not item.job.done]  # dropped meanwhile
            if not items:
                return
            texts = [item.text for item in items]
            jobs = [item.job for item in items]
            try:
                out, seconds, generated = await thread.run(self._compute, texts, options, jobs)
            except BatchCancelled as exc:
                log.info(
                    "%s: stopped a batch of %d texts that no request waits for%s",
                    self.pair, len(items), f" ({exc})" if str(exc) else "",
                )
                if self.metrics is not None:
                    self._series["cancelled_batches"].inc()
                for item in items:
                    item.job.fail(TranslationFailed())  # a no-op: every job is done already
                return
            except RuntimeUnavailable as exc:
                for item in items:
                    item.job.fail(NotReady.of(exc))
                return
            except TextRejected as exc:
                if not 0 <= exc.index < len(items):
                    raise TranslationFailed() from exc
                # Only that request is at fault: refuse it, and run the others again without it
                # (runtimes check lengths before decoding, so the first try cost little).
                culprit = items[exc.index]
                culprit.job.fail(TextRefused(culprit.slot, exc.reason))
                continue
            except _ContractBroken as exc:
                log.error("%s runtime %s broke its contract: %s", self.runtime.backend, self.pair, exc)
                for item in items:
                    item.job.fail(TranslationFailed())
                return
            except Exception:
                log.exception(
                    "%s runtime %s failed on a batch of %d", self.runtime.backend, self.pair, len(items)
                )
                for item in items:
                    item.job.fail(TranslationFailed())
                return
            for item, nbest in zip(items, out):
                item.job.deliver(item.slot, nbest)
            self._record(items, seconds, generated)
            return

    def _compute(
        self, texts: list[str], options: DecodingOptions, jobs: list[Job]
    ) -> tuple[list[list[Translation]], float, int]:
        """Runs in the worker thread: the model call (given up once no job waits for it), its
        contract check, and the token count."""
        start = time.perf_counter()
        out = self.runtime.translate_until(texts, options, lambda: all(job.done for job in jobs))
        seconds = time.perf_counter() - start
        if len(out) != len(texts) or any(not 1 <= len(nbest) <= options.n_best for nbest in out):
            raise _ContractBroken(
                f"{len(texts)} texts in, n-best sizes {[len(nbest) for nbest in out]} out (n_best={options.n_best})"
            )
        try:
            generated = sum(self.runtime.count_tokens([nbest[0].text for nbest in out]))
        except Exception:  # a metric is not worth failing a translation for
            log.exception("count_tokens failed on %s output", self.pair)
            generated = 0
        return out, seconds, generated

    def _record(self, items: list[_Item], seconds: float, generated: int) -> None:
        metrics = self.metrics
        if metrics is None:
            return
        series = self._series
        longest = max(item.tokens for item in items)
        metrics.compute_seconds.labels(**self._labels, backend=self.runtime.backend).observe(seconds)
        series["batch_size"].observe(len(items))
        series["batch_tokens"].observe(longest * len(items))
        series["segments"].inc(len(items))
        series["source_tokens"].inc(sum(item.tokens for item in items))
        series["generated_tokens"].inc(generated)


class _ContractBroken(Exception):
    pass
