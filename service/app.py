"""The application factory.

Settings are read once, by the caller of ``create_app``; models load in the lifespan handler
(never at import), so importing the app is cheap and a broken model directory fails startup —
before the server accepts requests — instead of failing requests.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI

from service.errors import install_error_handlers
from service.metrics import Metrics, MetricsMiddleware
from service.routes import router
from service.runtime.base import TranslationRuntime
from service.settings import Settings
from service.translator import Translator

log = logging.getLogger("service")

RuntimeFactory = Callable[[Settings], Sequence[TranslationRuntime]]


def load_default_runtimes(settings: Settings) -> Sequence[TranslationRuntime]:
    """The torch backend, imported here so that the service (and its tests) import without it."""
    from service.runtime.torch_runtime import load_runtimes

    return load_runtimes(settings)


def _close_all(runtimes: Sequence[object]) -> None:
    # Also called on a rejected runtime list, whose items may not be runtimes at all.
    for runtime in runtimes:
        close = getattr(runtime, "close", None)
        if not callable(close):
            continue
        try:
            close()
        except Exception:
            log.exception("closing runtime %r failed", runtime)


def create_app(settings: Settings | None = None, runtime_factory: RuntimeFactory | None = None) -> FastAPI:
    """Build the app. ``runtime_factory(settings)`` returns one runtime per language pair; it
    runs at startup, in a worker thread. Default: ``service.runtime.torch_runtime.load_runtimes``."""
    settings = settings if settings is not None else Settings()
    factory = runtime_factory if runtime_factory is not None else load_default_runtimes

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtimes = list(await anyio.to_thread.run_sync(factory, settings))
        try:
            translator = Translator(runtimes, settings)
            if settings.warmup:
                for runtime in runtimes:
                    await anyio.to_thread.run_sync(runtime.warmup)
        except BaseException:
            _close_all(runtimes)
            raise
        log.info(
            "serving %s",
            ", ".join(f"{r.pair} ({r.backend})" for r in translator.runtimes),
        )
        app.state.translator = translator
        try:
            yield
        finally:
            app.state.translator = None
            _close_all(runtimes)

    app = FastAPI(
        title="phrasal",
        summary="Machine translation that returns the word alignments its attention produces.",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.metrics = Metrics()
    app.state.translator = None  # set once the models are loaded
    install_error_handlers(app)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    app.include_router(router)
    return app
