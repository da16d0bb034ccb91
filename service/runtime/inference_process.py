"""Each model in its own process, so that the model's Python and the HTTP event loop do not share a GIL.

Why: decoding a small model is bound by the host launching kernels. Every torch op releases the
GIL while it runs and takes it back afterwards; when another thread of the same process is busy
in Python (the event loop parsing requests and building responses under load), each take-back
can wait for that thread's switch interval (5 ms), so a loop of many small kernels slows several
times over. In a child process the decode loop has a GIL of its own, and the request path keeps
the parent's.

The parent keeps a ``ProcessRuntime`` per served directory with the same interface as any
runtime: ``translate`` sends the batch down a pipe and blocks (without the GIL) for the answer.
What the request path asks often and cheaply stays in the parent: source token counts (the
runtime's own SentencePiece model, loaded here too) and the option check (answered by the child
once, for every alignment mode, at load). The device memory gauge reads the value the child
sends with every answer.

A child that dies (killed, out of memory, a crash in native code) is started again and the
batch it held is retried once; a batch that kills two children in a row fails (HTTP 500) so that
one poisonous request cannot take the service down in a loop. The child ignores SIGINT/SIGTERM:
the parent decides when it stops (after draining), and a child whose parent is gone sees its
pipe close and exits.

A child receives only its loader (a picklable function that builds its one runtime): no
settings, so no secrets (API keys are the parent's business).

Watchdog (``ProcessOptions``): a model call still unanswered ``request_timeout_s + grace_s``
after it was sent is stuck (a stopped or hung child): nobody waits for its answer any more, so
the child is killed and a new one started. Past ``request_timeout_s`` the runtime already
reports itself "stalled" (/health/ready 503), so that the load balancer stops sending while it
lasts. A child that exits is replaced at once: the watchdog waits on its process sentinel, and
``health`` reports "restarting" (/health/ready 503) from the moment it is gone until the new child
serves. A child idle for ``grace_s`` is pinged (when no batch holds the pipe) and replaced the
same way when it does not answer within that time: a stopped child is found before a request
runs into it.

A new child that fails to load (its model directory gone, say) is not retried per request: the
runtime reports "failed" with the child's reason, batches are refused at once (503 with
Retry-After), and a background thread retries after ``restart_backoff_s``, doubling the wait
after each failure up to ``restart_backoff_max_s``. Every start after the first counts as a
restart (``restarts()``, exported as ``phrasal_inference_restarts_total``).

Cancellation: the parent and its children share one counter, the highest batch number whose
requests all went away; the child's search checks it between decoding steps
(``translate_until``), so a batch nobody waits for stops instead of holding the model.
"""
from __future__ import annotations

import logging
import math
import multiprocessing
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait as wait_for_ready
from multiprocessing.process import BaseProcess
from typing import Any, get_args

from service.runtime.base import (
    AlignmentMode,
    BatchCancelled,
    DecodingOptions,
    ModelLoadFailed,
    RuntimeProblem,
    RuntimeUnavailable,
    TextRejected,
    TokenAlignment,
    Translation,
    TranslationRuntime,
    UnsupportedOption,
    load_abandoned,
    check_alignment_method,
)

log = logging.getLogger("service.runtime.process")

# spawn, not fork: a forked child would inherit the parent's threads' locks (and CUDA cannot be
# re-initialised in a fork of a process that touched it).
_CONTEXT = multiprocessing.get_context("spawn")
_CLOSE_TIMEOUT_S = 10.0
# How often a call waiting for its answer looks at its cancellation and its watchdog limit; the
# answer itself is read the moment it arrives.
_POLL_S = 0.05


class InferenceProcessDied(RuntimeError):
    """The child serving a pair exited while it held a batch."""


class InferenceProcessStalled(BatchCancelled):
    """A model call outlived the watchdog limit; its child was killed (and a new one started).
    A cancellation: the call outlived every deadline, so nobody waits for it."""


# What a child runs to build its runtime: picklable (a module-level function, or a
# functools.partial of one), since it travels to the spawned process.
RuntimeLoader = Callable[[], TranslationRuntime]


@dataclass(frozen=True)
class ProcessOptions:
    """The watchdog's and the restarts' timing (the module docstring), and whether a new child is
    warmed up before it serves."""

    request_timeout_s: float
    grace_s: float
    restart_backoff_s: float
    restart_backoff_max_s: float
    warmup: bool


def load_process_runtimes(loaders: Sequence[RuntimeLoader], options: ProcessOptions) -> list[TranslationRuntime]:
    """One child per loader, all loading at once; fails as a whole like the in-process loading
    (every child that did start is stopped)."""
    runtimes = [ProcessRuntime(load, options) for load in loaders]
    abandon = load_abandoned.get()
    problems = []
    for runtime in runtimes:
        try:
            runtime.wait_loaded(abandon)
        except (ModelLoadFailed, InferenceProcessDied) as exc:
            problems.append(str(exc))
    if problems:
        for runtime in runtimes:
            runtime.close()
        raise ModelLoadFailed("; ".join(problems))
    return runtimes


class ProcessRuntime(TranslationRuntime):
    """A runtime whose model lives in a child process (see the module docstring)."""

    def __init__(self, load: RuntimeLoader, options: ProcessOptions) -> None:
        self._load = load
        self._options = options
        self._lock = threading.Lock()  # one batch (or one restart) at a time per pipe
        self._memory: int | None = None
        self._tokenizer = None
        self._unsupported: dict[str, tuple[str, str]] = {}
        self.max_source_tokens: int | None = None  # the child's, once it has loaded
        self._conn: Connection | None = None
        self._process: Any = None
        self._closing = False  # set by close(): a child that dies then is not replaced
        self._closed = threading.Event()
        # Shared with every child of this runtime: batches numbered up to it are cancelled.
        self._cancel_upto = _CONTEXT.RawValue("q", 0)
        self._batch = 0
        self._call_limit_s = options.request_timeout_s + options.grace_s
        self._call_started: float | None = None  # monotonic time the call in flight was sent
        self._restarts = 0
        self._restarting = False
        self._failure: str | None = None  # why the last restart failed; None when serving
        self._backoff_s = options.restart_backoff_s
        self._next_attempt = 0.0
        self._healer: threading.Thread | None = None
        self._watcher: threading.Thread | None = None
        self._last_exchange = time.monotonic()  # the end of the last call, for the idle ping
        self._start()

    # -- the child's life ------------------------------------------------------------------

    def _start(self) -> None:
        parent, child = _CONTEXT.Pipe()
        process = _CONTEXT.Process(
            target=_child_main, args=(self._load, child, self._cancel_upto), name="phrasal-inference", daemon=True
        )
        process.start()
        child.close()  # the parent's copy: EOF on `parent` once the child is gone
        self._conn, self._process = parent, process
        self._loaded = False

    def wait_loaded(self, abandon: threading.Event | None = None) -> None:
        """Block until the child has loaded (and described) its model; ``ModelLoadFailed`` if it
        could not, or once ``abandon`` is set (the child is killed); ``InferenceProcessDied`` if
        it died first."""
        try:
            while abandon is not None:
                if abandon.is_set():
                    self._process.kill()  # not terminate(): the child ignores SIGTERM
                    self._stop_process()
                    raise ModelLoadFailed("loading stopped: the server is shutting down")
                if self._conn.poll(_POLL_S):
                    break
            reply = self._conn.recv()
        except (EOFError, OSError):
            raise self._died() from None
        if reply[0] != "loaded":
            self._stop_process()
            raise ModelLoadFailed(reply[1])
        info = reply[1]
        self.source_lang, self.target_lang, self.backend = info["source_lang"], info["target_lang"], info["backend"]
        self.precision = info["precision"]
        self._unsupported = info["unsupported"]
        self.alignment_methods = tuple(info["alignment_methods"])
        self.default_alignment_method = info["default_alignment_method"]
        self.max_source_tokens = info["max_source_tokens"]
        self._memory = info["memory"]
        if info["tokenizer_path"] is not None and self._tokenizer is None:
            from model.text.tokenizer import Tokenizer  # sentencepiece only: no engine in the parent

            self._tokenizer = Tokenizer(info["tokenizer_path"])
        self._loaded = True
        log.info("inference process %d serves %s (%s)", self._process.pid, self.pair, self.backend)
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._watch, name="inference-watchdog", daemon=True)
            self._watcher.start()

    def _died(self) -> InferenceProcessDied:
        self._process.join(1.0)
        return InferenceProcessDied(f"the inference process exited (exit code {self._process.exitcode})")

    def _exchange(self, request: tuple, cancelled: Callable[[], bool] | None, limit: float | None = None) -> tuple:
        """Send ``request`` and wait for its answer, passing on a cancellation and killing the
        child once the call outlives ``limit`` seconds (``InferenceProcessStalled``); None: no
        limit (a warm-up: first use can take long, and no request waits for it)."""
        limit = float("inf") if limit is None else limit
        self._conn.send(request)
        started = self._call_started = time.monotonic()
        told = False
        try:
            while not self._conn.poll(_POLL_S):
                if not told and cancelled is not None and cancelled():
                    self._cancel_upto.value = request[1]
                    told = True
                waited = time.monotonic() - started
                if waited > limit:
                    pid = self._process.pid
                    log.error(
                        "inference process %d for %s has not answered a %s for %.0f s (limit %g s); killing it",
                        pid, self.pair, "batch" if request[0] == "translate" else request[0], waited, limit,
                    )
                    self._process.kill()  # SIGKILL: a stopped process takes it too
                    self._process.join(_CLOSE_TIMEOUT_S)
                    self._loaded = False
                    raise InferenceProcessStalled(
                        f"the inference process for {self.pair} did not answer within {limit:g} s and was killed"
                    )
            return self._conn.recv()
        except (EOFError, OSError):
            raise self._died() from None
        finally:
            self._call_started = None
            self._last_exchange = time.monotonic()

    def _restart(self) -> None:
        """Replace the child (lock held). On a load failure: the failed state, a background
        retry after the backoff, and ``RuntimeUnavailable`` for the caller."""
        self._restarts += 1
        log.error("starting a new inference process for %s (restart %d)", self.pair, self._restarts)
        self._restarting = True
        try:
            self._stop_process()
            self._start()
            self.wait_loaded()
            if self._options.warmup:  # as at start: the first batch must not pay for it
                self._batch += 1
                self._exchange(("warmup", self._batch), None)
        except (ModelLoadFailed, InferenceProcessDied) as exc:
            self._fail(str(exc))
            raise self._unavailable() from None
        finally:
            self._restarting = False
        if self._failure is not None:
            log.info("inference process for %s restarted after %s", self.pair, self._failure)
        self._failure = None
        self._backoff_s = self._options.restart_backoff_s

    def _fail(self, reason: str) -> None:
        self._failure = reason
        self._next_attempt = time.monotonic() + self._backoff_s
        log.error(
            "inference process for %s failed to restart: %s; next attempt in %g s", self.pair, reason, self._backoff_s
        )
        self._backoff_s = min(self._backoff_s * 2, self._options.restart_backoff_max_s)
        if self._healer is None or not self._healer.is_alive():
            self._healer = threading.Thread(target=self._heal, name="inference-restart", daemon=True)
            self._healer.start()

    def _heal(self) -> None:
        """Background retries of a failed restart, each after its backoff, until one loads."""
        while not self._closed.wait(max(self._next_attempt - time.monotonic(), 0)):
            with self._lock:
                if self._closing or self._failure is None:
                    return
                try:
                    self._restart()
                except RuntimeUnavailable:
                    continue
                return

    def _watch(self) -> None:
        """Replace a child that is gone as soon as it is gone (its process sentinel wakes this
        thread), and ping it whenever the pipe is free, every ``grace_s``: a child that does not
        answer within that time is killed and replaced."""
        interval = self._options.grace_s
        while not self._closed.is_set():
            process = self._process
            if process is None:  # between two children
                self._closed.wait(_POLL_S)
                continue
            died = bool(wait_for_ready([process.sentinel], timeout=interval))
            if self._closed.is_set():
                return
            if not died and time.monotonic() - self._last_exchange < interval:
                continue  # it answered lately
            if self._failure is not None or not self._lock.acquire(blocking=False):
                # A batch holds the pipe (its own wait sees the child go), or a retry is due.
                if died:
                    self._closed.wait(_POLL_S)
                continue
            try:
                if self._closing or self._failure is not None or process is not self._process:
                    continue
                try:
                    if died:
                        raise self._died()
                    if self._loaded:
                        self._batch += 1
                        self._exchange(("ping", self._batch), None, interval)
                        continue
                except InferenceProcessStalled:
                    pass
                except (InferenceProcessDied, BrokenPipeError, OSError) as exc:
                    log.error("inference process for %s found gone while idle: %s", self.pair, exc)
                    self._loaded = False
                if self._closing:
                    continue
                try:
                    self._restart()
                except RuntimeUnavailable:
                    pass  # failed: the background retries take over
            finally:
                self._lock.release()

    def _unavailable(self) -> RuntimeUnavailable:
        wait = max(self._next_attempt - time.monotonic(), 0)
        return RuntimeUnavailable(
            f"the inference process for {self.pair} failed to restart: {self._failure}; next attempt in {wait:.0f} s",
            retry_after=max(1, math.ceil(wait)),
        )

    def _call(self, kind: str, payload: tuple = (), cancelled: Callable[[], bool] | None = None) -> Any:
        """Send one request and return the child's answer, raising what the child raised."""
        if self._failure is not None and not self._closing:
            raise self._unavailable()  # at once: not behind a restart attempt holding the lock
        with self._lock:
            for attempt in (1, 2):
                if self._closing:
                    raise InferenceProcessDied(f"the inference process for {self.pair} was closed")
                if self._failure is not None:
                    raise self._unavailable()
                self._batch += 1
                try:
                    if not self._loaded:
                        self._restart()
                    limit = self._call_limit_s if kind == "translate" else None
                    reply = self._exchange((kind, self._batch, *payload), cancelled, limit)
                    break
                except InferenceProcessStalled:
                    # Nobody waits for this batch any more (it outlived every deadline): not
                    # retried; the next batch gets a fresh child.
                    try:
                        self._restart()
                    except RuntimeUnavailable:
                        pass
                    raise
                except (InferenceProcessDied, BrokenPipeError, OSError) as exc:
                    self._loaded = False
                    if attempt == 2:
                        raise InferenceProcessDied(f"{exc}; the batch was tried twice") from None
        kind, *rest = reply
        if kind == "ok":
            value, self._memory = rest
            return value
        if kind == "cancelled":
            raise BatchCancelled()
        if kind == "rejected":
            raise TextRejected(*rest)
        if kind == "unsupported":
            raise UnsupportedOption(*rest)
        raise RuntimeError(f"inference process for {self.pair}: {rest[0]}")

    # -- TranslationRuntime ----------------------------------------------------------------

    def translate(self, texts: Sequence[str], options: DecodingOptions) -> list[list[Translation]]:
        return self._call("translate", (list(texts), options))

    def translate_until(
        self, texts: Sequence[str], options: DecodingOptions, cancelled: Callable[[], bool]
    ) -> list[list[Translation]]:
        return self._call("translate", (list(texts), options), cancelled)

    def force_align(self, pairs: Sequence[tuple[str, str]], method: str) -> list[TokenAlignment]:
        return self._call("align", (list(pairs), method))

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float] | None:
        return self._call("score", (list(pairs),))

    def warmup(self) -> None:
        self._call("warmup")

    def health(self) -> RuntimeProblem | None:
        if self._closing:
            return None
        if self._failure is not None:
            return RuntimeProblem("failed", self._unavailable().reason)
        if self._restarting:
            return RuntimeProblem("restarting", f"the inference process for {self.pair} is restarting")
        process = self._process
        if process is not None and _exited(process):  # gone; the watchdog is replacing it
            return RuntimeProblem("restarting", f"the inference process for {self.pair} exited and is being replaced")
        started = self._call_started
        if started is not None and not self._restarting:
            waited = time.monotonic() - started
            if waited > self._options.request_timeout_s:
                return RuntimeProblem(
                    "stalled",
                    f"the inference process for {self.pair} has not answered a batch for {waited:.0f} s; "
                    f"it is restarted after {self._call_limit_s:g} s",
                )
        return None

    def restarts(self) -> int | None:
        return self._restarts

    def check_options(self, options: DecodingOptions) -> None:
        check_alignment_method(self, options)
        refused = self._unsupported.get(options.alignment)
        if refused is not None:
            raise UnsupportedOption(*refused)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        if self._tokenizer is None:
            return super().count_tokens(texts)
        return [len(ids) for ids in self._tokenizer.encode_batch(list(texts))]

    def memory_bytes(self) -> int | None:
        return self._memory

    def close(self) -> None:
        """Stop the child. A batch it still computes is nobody's any more (the service closes
        its runtimes after the drain): the child is killed under it rather than waited for, so
        that shutdown takes the drain timeout and not one more batch (an orchestrator's SIGKILL
        would otherwise come first and leave the child computing on, orphaned)."""
        self._closing = True
        self._closed.set()
        if not self._lock.acquire(blocking=False):
            process = self._process
            if process is not None:
                process.kill()  # not terminate(): the child ignores SIGTERM
                process.join(_CLOSE_TIMEOUT_S)
            return
        try:
            if self._conn is not None:
                try:
                    self._conn.send(("close", 0))
                except (BrokenPipeError, OSError):
                    pass
            self._stop_process()
        finally:
            self._lock.release()

    def _stop_process(self) -> None:
        process, self._process = self._process, None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if process is None:
            return
        process.join(_CLOSE_TIMEOUT_S)
        if not _exited(process):
            process.kill()  # not terminate(): the child ignores SIGTERM
            process.join(_CLOSE_TIMEOUT_S)


def _exited(process: BaseProcess) -> bool:
    """Whether the child has exited, whichever thread reaped it: its sentinel says so. Not
    `is_alive()`: where another thread's `join` reaped the child first, its `waitpid` fails with
    ECHILD, which multiprocessing reads as still running (readiness had answered 200 for a child
    killed a moment before)."""
    return bool(wait_for_ready([process.sentinel], timeout=0))


# -- the child ---------------------------------------------------------------------------


def _child_main(load: RuntimeLoader, conn: Connection, cancel_upto: Any) -> None:
    # Ctrl-C reaches the whole process group; the parent drains first and then closes us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s[child]: %(message)s")
    try:
        runtime = load()
        conn.send(("loaded", _describe(runtime)))
    except Exception as exc:
        log.exception("loading failed")
        first_line = (str(exc).splitlines() or [""])[0][:300]
        if isinstance(exc, ModelLoadFailed):  # already "Type: message"
            conn.send(("failed", first_line))
        else:
            conn.send(("failed", f"{type(exc).__name__}: {first_line}" if first_line else type(exc).__name__))
        return
    try:
        while True:
            try:
                request = conn.recv()
            except (EOFError, OSError):
                return  # the parent is gone
            if request[0] == "close":
                return
            conn.send(_answer(runtime, request, cancel_upto))
    finally:
        runtime.close()


def _describe(runtime: TranslationRuntime) -> dict[str, Any]:
    unsupported = {}
    for mode in get_args(AlignmentMode):
        try:
            runtime.check_options(DecodingOptions(alignment=mode))
        except UnsupportedOption as exc:
            unsupported[mode] = (exc.field, exc.reason)
    tokenizer = getattr(runtime, "tokenizer", None)
    return {
        "source_lang": runtime.source_lang,
        "target_lang": runtime.target_lang,
        "backend": runtime.backend,
        "precision": runtime.precision,
        "unsupported": unsupported,
        "alignment_methods": list(runtime.alignment_methods),
        "default_alignment_method": runtime.default_alignment_method,
        # What a forced pair's sides may hold (service.translator: Translator.align).
        "max_source_tokens": getattr(runtime, "max_source_tokens", None),
        "memory": runtime.memory_bytes(),
        "tokenizer_path": str(tokenizer.path) if tokenizer is not None else None,
    }


def _answer(runtime: TranslationRuntime, request: tuple, cancel_upto: Any) -> tuple:
    kind, batch, *payload = request
    try:
        if kind == "translate":
            texts, options = payload
            value = runtime.translate_until(texts, options, lambda: cancel_upto.value >= batch)
        elif kind == "align":
            pairs, method = payload
            value = runtime.force_align(pairs, method)
        elif kind == "score":
            (pairs,) = payload
            value = runtime.score(pairs)
        elif kind == "ping":
            value = None
        elif kind == "warmup":
            value = runtime.warmup()
        else:
            return ("error", f"unknown request {kind!r}")
        return ("ok", value, runtime.memory_bytes())
    except BatchCancelled:
        return ("cancelled",)
    except TextRejected as exc:
        return ("rejected", exc.index, exc.reason)
    except UnsupportedOption as exc:
        return ("unsupported", exc.field, exc.reason)
    except Exception as exc:
        log.exception("%s batch failed", runtime.pair)
        return ("error", f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}")
