"""Each model in its own process, so that the model's Python and the HTTP event loop do not share a GIL.

Why: decoding a small model is bound by the host launching kernels. Every torch op releases the
GIL while it runs and takes it back afterwards; when another thread of the same process is busy
in Python (the event loop parsing requests and building responses under load), each take-back
can wait for that thread's switch interval (5 ms). A probe on the 2-core dev machine: a loop of
3,000 small matmuls took 0.21 s alone and 1.57 s beside one busy Python thread. In a child
process the decode loop has a GIL of its own, and the request path keeps the parent's.

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
"""
from __future__ import annotations

import logging
import multiprocessing
import signal
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, get_args

from service.runtime.base import (
    AlignmentMode,
    DecodeOptions,
    TextRejected,
    TokenAlignment,
    Translation,
    TranslationRuntime,
    UnsupportedOption,
    check_alignment_method,
)
from service.settings import Settings

log = logging.getLogger("service.runtime.process")

# spawn, not fork: a forked child would inherit the parent's threads' locks (and CUDA cannot be
# re-initialised in a fork of a process that touched it).
_CONTEXT = multiprocessing.get_context("spawn")
_CLOSE_TIMEOUT_S = 10.0


class InferenceProcessDied(RuntimeError):
    """The child serving a pair exited while it held a batch."""


def served_dirs(settings: Settings) -> list[Path]:
    return list(settings.model_dirs if settings.backend == "torch" else settings.export_dirs)


def child_settings(settings: Settings, path: Path) -> Settings:
    """What one child needs: the same settings, its one directory, no process of its own, and
    no secrets (API keys are the parent's business)."""
    key = "model_dirs" if settings.backend == "torch" else "export_dirs"
    return settings.model_copy(update={key: [path], "inference_process": False, "api_keys": {}})


def load_process_runtimes(settings: Settings) -> list[TranslationRuntime]:
    """One child per served directory, all loading at once; fails as a whole like the in-process
    factory (every child that did start is stopped)."""
    runtimes = [ProcessRuntime(child_settings(settings, path)) for path in served_dirs(settings)]
    problems = []
    for runtime in runtimes:
        try:
            runtime.wait_loaded()
        except RuntimeError as exc:
            problems.append(str(exc))
    if problems:
        for runtime in runtimes:
            runtime.close()
        raise RuntimeError("; ".join(problems))
    return runtimes


class ProcessRuntime(TranslationRuntime):
    """A runtime whose model lives in a child process (see the module docstring)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._lock = threading.Lock()  # one batch at a time per pipe
        self._memory: int | None = None
        self._tokenizer = None
        self._unsupported: dict[str, tuple[str, str]] = {}
        self._conn: Connection | None = None
        self._process: Any = None
        self._closing = False  # set by close(): a child that dies then is not replaced
        self._start()

    # -- the child's life ------------------------------------------------------------------

    def _start(self) -> None:
        parent, child = _CONTEXT.Pipe()
        process = _CONTEXT.Process(target=_child_main, args=(self._settings, child), name="phrasal-inference", daemon=True)
        process.start()
        child.close()  # the parent's copy: EOF on `parent` once the child is gone
        self._conn, self._process = parent, process
        self._loaded = False

    def wait_loaded(self) -> None:
        """Block until the child has loaded (and described) its model; RuntimeError if it failed."""
        reply = self._receive()
        if reply[0] != "loaded":
            self._stop_process()
            raise RuntimeError(reply[1])
        info = reply[1]
        self.source_lang, self.target_lang, self.backend = info["source_lang"], info["target_lang"], info["backend"]
        self._unsupported = info["unsupported"]
        self.alignment_methods = tuple(info["alignment_methods"])
        self.default_alignment_method = info["default_alignment_method"]
        self._memory = info["memory"]
        if info["tokenizer_path"] is not None and self._tokenizer is None:
            from model.tokenizer import Tokenizer  # sentencepiece only: no engine in the parent

            self._tokenizer = Tokenizer(info["tokenizer_path"])
        self._loaded = True
        log.info("inference process %d serves %s (%s)", self._process.pid, self.pair, self.backend)

    def _receive(self) -> tuple:
        try:
            return self._conn.recv()
        except (EOFError, OSError):
            self._process.join(1.0)
            code = self._process.exitcode
            raise InferenceProcessDied(f"the inference process exited (exit code {code})") from None

    def _restart(self) -> None:
        log.error("inference process for %s died; starting a new one", self.pair)
        self._stop_process()
        self._start()
        self.wait_loaded()

    def _call(self, request: tuple) -> Any:
        """Send one request and return the child's answer, raising what the child raised."""
        with self._lock:
            for attempt in (1, 2):
                if self._closing:
                    raise InferenceProcessDied(f"the inference process for {self.pair} was closed")
                try:
                    if not self._loaded:
                        self._restart()
                    self._conn.send(request)
                    reply = self._receive()
                    break
                except (InferenceProcessDied, BrokenPipeError, OSError) as exc:
                    self._loaded = False
                    if attempt == 2:
                        raise InferenceProcessDied(f"{exc}; the batch was tried twice") from None
        kind, *rest = reply
        if kind == "ok":
            value, self._memory = rest
            return value
        if kind == "rejected":
            raise TextRejected(*rest)
        if kind == "unsupported":
            raise UnsupportedOption(*rest)
        raise RuntimeError(f"inference process for {self.pair}: {rest[0]}")

    # -- TranslationRuntime ----------------------------------------------------------------

    def translate(self, texts: Sequence[str], options: DecodeOptions) -> list[list[Translation]]:
        return self._call(("translate", list(texts), options))

    def force_align(self, pairs: Sequence[tuple[str, str]], method: str) -> list[TokenAlignment]:
        return self._call(("align", list(pairs), method))

    def warmup(self) -> None:
        self._call(("warmup",))

    def check_options(self, options: DecodeOptions) -> None:
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
        if not self._lock.acquire(blocking=False):
            process = self._process
            if process is not None:
                process.kill()  # not terminate(): the child ignores SIGTERM
                process.join(_CLOSE_TIMEOUT_S)
            return
        try:
            if self._conn is not None:
                try:
                    self._conn.send(("close",))
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
        if process.is_alive():
            process.kill()  # not terminate(): the child ignores SIGTERM
            process.join(_CLOSE_TIMEOUT_S)


# -- the child ---------------------------------------------------------------------------


def _child_main(settings: Settings, conn: Connection) -> None:
    # Ctrl-C reaches the whole process group; the parent drains first and then closes us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s[child]: %(message)s")
    try:
        from service.runtime.factory import load_runtimes

        (runtime,) = load_runtimes(settings)
        conn.send(("loaded", _describe(runtime)))
    except Exception as exc:
        log.exception("loading failed")
        first_line = (str(exc).splitlines() or [""])[0][:300]
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
            conn.send(_answer(runtime, request))
    finally:
        runtime.close()


def _describe(runtime: TranslationRuntime) -> dict[str, Any]:
    unsupported = {}
    for mode in get_args(AlignmentMode):
        try:
            runtime.check_options(DecodeOptions(alignment=mode))
        except UnsupportedOption as exc:
            unsupported[mode] = (exc.field, exc.reason)
    tokenizer = getattr(runtime, "tokenizer", None)
    return {
        "source_lang": runtime.source_lang,
        "target_lang": runtime.target_lang,
        "backend": runtime.backend,
        "unsupported": unsupported,
        "alignment_methods": list(runtime.alignment_methods),
        "default_alignment_method": runtime.default_alignment_method,
        "memory": runtime.memory_bytes(),
        "tokenizer_path": str(tokenizer.path) if tokenizer is not None else None,
    }


def _answer(runtime: TranslationRuntime, request: tuple) -> tuple:
    try:
        if request[0] == "translate":
            value = runtime.translate(request[1], request[2])
        elif request[0] == "align":
            value = runtime.force_align(request[1], request[2])
        elif request[0] == "warmup":
            value = runtime.warmup()
        else:
            return ("error", f"unknown request {request[0]!r}")
        return ("ok", value, runtime.memory_bytes())
    except TextRejected as exc:
        return ("rejected", exc.index, exc.reason)
    except UnsupportedOption as exc:
        return ("unsupported", exc.field, exc.reason)
    except Exception as exc:
        log.exception("%s batch failed", runtime.pair)
        return ("error", f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}")
