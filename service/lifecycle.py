"""Where the service is in its life, for /health/ready and for the routes.

    loading -> warming -> ready -> draining -> stopped
       \\---------\\-> failed (the process stays live, not ready; the reason is logged and shown)

Models load in the background after the server starts listening, so /health/live answers at
once and /health/ready says what is going on ("loading", or why it failed) instead of the port
refusing connections for as long as a load takes. ``begin_drain`` is called on SIGTERM, in any
phase: a SIGTERM during loading stays a stop (no warm-up, never "ready").

Once ready, a runtime can still be unable to serve for a while (``TranslationRuntime.health``:
its inference process stalled, restarting, or failing to restart); readiness then reports that
runtime's phase and reason (503) until it serves again.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Literal

import anyio.to_thread

from service.catalog import ServedModel
from service.errors import NotReady
from service.memory import Memories
from service.metrics import Metrics
from service.runtime.base import ModelLoadFailed, RuntimeProblem, TranslationRuntime, load_abandoned
from service.settings import Settings
from service.translator import Translator

log = logging.getLogger("service")

Phase = Literal["loading", "warming", "ready", "failed", "draining", "stopped"]
# What /health/ready reports: the lifecycle's phase, or a ready service's troubled runtime's.
HealthPhase = Literal["loading", "warming", "ready", "stalled", "restarting", "failed", "draining", "stopped"]
RuntimeFactory = Callable[[Settings], Sequence[ServedModel | TranslationRuntime]]

_REASONS: dict[str, str] = {
    "loading": "loading models",
    "warming": "warming up",
    "draining": "shutting down: finishing the requests in flight",
    "stopped": "stopped",
}


def close_all(runtimes: Sequence[object]) -> None:
    # Also called on a rejected runtime list, whose items may not be runtimes at all.
    for item in runtimes:
        runtime = item.runtime if isinstance(item, ServedModel) else item
        close = getattr(runtime, "close", None)
        if not callable(close):
            continue
        try:
            close()
        except Exception:
            log.exception("closing runtime %r failed", runtime)


class Lifecycle:
    def __init__(self, settings: Settings, factory: RuntimeFactory, metrics: Metrics) -> None:
        self.settings = settings
        self.factory = factory
        self.metrics = metrics
        self.phase: Phase = "loading"
        self.failure: str | None = None
        self.translator: Translator | None = None
        self._runtimes: list[ServedModel | TranslationRuntime] = []
        self._loader: asyncio.Task[None] | None = None
        self._abandon_load = threading.Event()  # SIGTERM during the load
        metrics.ready.set_function(lambda: 1.0 if self.ready else 0.0)

    @property
    def ready(self) -> bool:
        return self.phase == "ready" and self.runtime_problem() is None

    def runtime_problem(self) -> RuntimeProblem | None:
        """The first served runtime that cannot serve now, when the service is otherwise ready."""
        if self.phase != "ready" or self.translator is None:
            return None
        for runtime in self.translator.runtimes:
            problem = runtime.health()
            if problem is not None:
                return problem
        return None

    def health(self) -> tuple[HealthPhase, str | None]:
        """(phase, reason) for /health/ready; reason is None when ready."""
        problem = self.runtime_problem()
        if problem is not None:
            return problem.phase, problem.reason
        return self.phase, self.reason

    @property
    def stopping(self) -> bool:
        """SIGTERM came: work cancelled now was cut off by the drain timeout."""
        return self.phase in ("draining", "stopped")

    @property
    def reason(self) -> str | None:
        """Why the service is not ready (None when it is)."""
        if self.phase == "ready":
            return None
        if self.phase == "failed":
            return f"model load failed: {self.failure}"
        return _REASONS[self.phase]

    def translator_or_raise(self) -> Translator:
        """For the routes: the translator, or the 503 that says why there is none.

        Draining still serves: whatever reached the server before uvicorn closed its listening
        socket is in flight and gets its answer; only readiness turns off (so that load
        balancers stop sending), and uvicorn takes no new connections.
        """
        if self.translator is None or self.phase not in ("ready", "draining"):
            retry = None if self.phase == "failed" else 5
            raise NotReady(f"not ready: {self.reason}", retry_after=retry)
        return self.translator

    # -- startup and shutdown, driven by the app's lifespan ---------------------------------

    def start_loading(self) -> None:
        self._loader = asyncio.create_task(self._load(), name="phrasal-load")

    async def wait_loaded(self) -> None:
        """Until loading ends, one way or the other: the shutdown waits so before it closes what the
        load made, and an in-process client (TestClient) before its first request."""
        if self._loader is not None:
            await asyncio.shield(self._loader)

    async def _load(self) -> None:
        settings = self.settings
        load_abandoned.set(self._abandon_load)  # this task's context, copied into the thread
        try:
            runtimes = list(await anyio.to_thread.run_sync(self.factory, settings))
            self._runtimes = runtimes
            memories = await anyio.to_thread.run_sync(Memories.load, settings.memories)
            translator = Translator(runtimes, settings, self.metrics, memories)
            if settings.warmup:
                # A SIGTERM during the load has set "draining": that stop stands (no warm-up).
                for runtime in translator.runtimes:
                    if self.phase not in ("loading", "warming"):
                        break
                    self.phase = "warming"
                    await anyio.to_thread.run_sync(runtime.warmup)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Live but not ready: an orchestrator shows the pod as not ready with the reason,
            # instead of restarting it in a loop that hides the message.
            first_line = (str(exc).splitlines() or [""])[0][:300]
            if isinstance(exc, ModelLoadFailed):  # already "Type: what, naming the file"
                self.failure = first_line
            else:
                self.failure = f"{type(exc).__name__}: {first_line}" if first_line else type(exc).__name__
            if self.stopping:  # SIGTERM came during the load: the stop stands
                log.info("model load ended by the shutdown: %s", self.failure)
                close_all(self._runtimes)
                self._runtimes = []
                return
            self.phase = "failed"
            log.exception("model load failed; the service stays up but not ready: %s", self.failure)
            close_all(self._runtimes)
            self._runtimes = []
            return
        if self.phase not in ("loading", "warming"):  # shut down while loading
            log.info("loaded, but shutting down: not serving")
            close_all(runtimes)
            self._runtimes = []
            return
        translator.start()
        for model in translator.models:
            runtime = model.runtime
            if runtime.memory_bytes() is not None:
                self.metrics.watch_memory(model.pair, model.name, runtime.backend, runtime.memory_bytes)
            if runtime.restarts() is not None:
                self.metrics.watch_restarts(model.pair, model.name, runtime.restarts)
        self.translator = translator
        self.phase = "ready"
        log.info("ready: serving %s", ", ".join(f"{m.pair} as {m.name} ({m.runtime.backend})" for m in translator.models))

    def begin_drain(self) -> None:
        """SIGTERM: report not ready; uvicorn stops accepting connections and lets the requests
        in flight finish (``drain_timeout_s``)."""
        if self.phase in ("ready", "loading", "warming"):
            log.info("draining: no new connections; finishing the requests in flight")
            self.phase = "draining"
            self._abandon_load.set()

    async def shutdown(self) -> None:
        """Lifespan shutdown: by now uvicorn has drained the connections (or given up)."""
        if self.phase != "failed":
            self.phase = "stopped"
        if self._loader is not None and not self._loader.done():
            # A thread cannot be interrupted: let the load finish, then close what it made.
            try:
                await self.wait_loaded()
            except Exception:
                pass
        translator, self.translator = self.translator, None
        if translator is not None:
            await translator.stop()
        close_all(self._runtimes)
        self._runtimes = []
