"""The application factory.

Settings are read once, by the caller of ``create_app``. Models load in the background once the
lifespan starts (never at import), so importing the app is cheap, /health/live answers during a
long load, and a broken model directory leaves the process live but not ready, with the reason
in the log and in /health/ready (service/lifecycle.py).

Middleware, outermost first: metrics (sees every status, refusals included) -> admission (at
most ``max_connections`` requests served at once) -> CORS (only when origins are configured) ->
API keys and rate limits (only when keys are configured) -> body guard (content type, size,
time) -> replica routing (only when `replicas` are configured) -> the routes.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial

from fastapi import APIRouter, FastAPI
from fastapi.middleware.cors import CORSMiddleware

from service.http.admission import AdmissionMiddleware
from service.http.auth import DEEPL_PREFIX, LIBRETRANSLATE_PREFIX, ApiKeyMiddleware, KeyRing, TokenBucket
from service.http.body_guard import BodyGuardMiddleware
from service.http.errors import install_error_handlers
from service.http.glossaries import router as glossaries_router
from service.http.compatible import KeyCheck
from service.http.deepl import router as deepl_router, router_v3 as deepl_v3_router
from service.http.libretranslate import router as libretranslate_router
from service.http.openapi import install_served_openapi
from service.http.request_metrics import MetricsMiddleware
from service.runtime.cards import read_card
from service.catalog import ServedModel
from service.runtime.domains import DomainScorer
from service.document_store import DocumentStore
from service.document_worker import DocumentWorker
from service.glossary_store import GlossaryStore
from service.http.replicas import ReplicaRouting, Replicas
from service.lifecycle import Lifecycle
from service.metrics import Metrics
from service.routes import router
from service.runtime.base import TranslationRuntime
from service.runtime.factory import RuntimeSpec, load_runtime
from service.runtime.inference_process import ProcessOptions, load_process_runtimes
from service.settings import Settings

log = logging.getLogger("service")

RuntimeFactory = Callable[[Settings], Sequence[ServedModel | TranslationRuntime]]


def load_default_runtimes(settings: Settings) -> Sequence[ServedModel]:
    """One runtime per served directory, by the backend ``settings.backend`` names
    (service/runtime/factory.py imports its engine only then, so that the service and its tests
    import without any); each in a child process of its own when ``settings.inference_process``;
    each with its card (service/catalog.py), read first: a malformed card fails before any load, and
    its tokenizer's language model, by which a request's texts may choose it (service/domain_routing.py)."""
    if settings.backend != "torch" and not settings.export_dirs:
        raise ValueError(
            f"backend {settings.backend!r} serves exported models: set export_dirs "
            f"(e.g. PHRASAL_EXPORT_DIRS='[\"exports/en-de-{settings.backend}\"]', written by phrasal-export)"
        )
    paths = settings.served_dirs
    cards = [read_card(path, settings.model_domains) for path in paths]
    specs = [RuntimeSpec(settings.backend, path, settings.device, static_decoding=settings.static_decoding,
                         cpu_quantization=settings.cpu_quantization, cpu_kernels=settings.cpu_kernels,
                         decoding=settings.decoding) for path in paths]
    if not settings.inference_process:
        runtimes = [load_runtime(spec) for spec in specs]
    else:
        runtimes = load_process_runtimes([partial(load_runtime, spec) for spec in specs], process_options(settings))
    return [ServedModel(card, runtime, DomainScorer.of_model_dir(path)) for card, runtime, path in zip(cards, runtimes, paths)]


def process_options(settings: Settings) -> ProcessOptions:
    return ProcessOptions(
        request_timeout_s=settings.request_timeout_s,
        grace_s=settings.inference_grace_s,
        restart_backoff_s=settings.inference_restart_backoff_s,
        restart_backoff_max_s=settings.inference_restart_backoff_max_s,
        warmup=settings.warmup,
    )


# The routes that take a document to translate (a multipart form up to max_document_bytes).
UPLOAD_ROUTES = {("POST", LIBRETRANSLATE_PREFIX + "/translate_file"), ("POST", DEEPL_PREFIX + "/v2/document")}


def body_routes(routes: APIRouter) -> set[tuple[str, str]]:
    """(method, path) of every route that reads a request body: what the body guard checks."""
    return {
        (method, route.path)
        for route in routes.routes
        for method in getattr(route, "methods", ())
        if method in ("POST", "PUT", "PATCH")
    }


def create_app(settings: Settings | None = None, runtime_factory: RuntimeFactory | None = None) -> FastAPI:
    """Build the app. ``runtime_factory(settings)`` returns the models served (``ServedModel``s,
    or bare runtimes, each then named after its pair); it runs at startup, in a worker thread. Default: ``load_default_runtimes`` (the backend the
    settings name)."""
    settings = settings if settings is not None else Settings()
    factory = runtime_factory if runtime_factory is not None else load_default_runtimes
    metrics = Metrics()
    lifecycle = Lifecycle(settings, factory, metrics)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        lifecycle.start_loading()
        app.state.document_worker.start()
        try:
            yield
        finally:
            await app.state.document_worker.stop()  # the document in hand is queued again for the next start
            await lifecycle.shutdown()
            app.state.glossaries.close()
            app.state.documents.close()

    app = FastAPI(
        title="phrasal",
        summary="Machine translation that returns the word alignments its attention produces.",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.lifecycle = lifecycle
    app.state.glossaries = GlossaryStore(settings.glossary_db)
    app.state.documents = DocumentStore(settings.document_db, retention_s=settings.document_retention_s)
    app.state.document_worker = DocumentWorker(app.state.documents, lifecycle, metrics)
    install_error_handlers(app)
    install_served_openapi(
        app,
        lambda: [(m.key, m.name) for m in lifecycle.translator.models] if lifecycle.translator else [],
        settings.max_segments, settings.max_chars,
    )
    # add_middleware puts each one outside the ones before it: innermost first.
    if settings.replicas:
        # Inside the body guard: what it sends on to another replica has passed the guard here.
        app.state.replicas = Replicas(settings.replicas, settings.replica_address,
                                      timeout_s=settings.request_timeout_s + 1.0)
        app.add_middleware(ReplicaRouting, replicas=app.state.replicas, metrics=metrics,
                           retry_after_s=settings.retry_after_s)
    app.add_middleware(
        BodyGuardMiddleware,
        max_bytes=settings.max_body_bytes,
        timeout_s=settings.body_timeout_s,
        metrics=metrics,
        routes=body_routes(router) | body_routes(glossaries_router),
        # DeepL's routes read parameters from a body whatever the method (its client sends a GET's so).
        form_routes=body_routes(libretranslate_router) | {(m, r.path) for deepl in (deepl_router, deepl_v3_router)
                                                          for r in deepl.routes for m in r.methods},
        upload_routes=UPLOAD_ROUTES,
        max_upload_bytes=settings.max_document_bytes,
        stopping=lambda: lifecycle.stopping,
    )
    if settings.api_keys:
        buckets = None
        if settings.rate_limit_per_s is not None:
            buckets = TokenBucket(settings.rate_limit_per_s, settings.rate_limit_burst)
        sent_on = app.state.replicas.sent_on if settings.replicas else None
        app.state.api_keys = KeyCheck(KeyRing(settings.api_keys), buckets, metrics, sent_on)
        app.add_middleware(ApiKeyMiddleware, keys=settings.api_keys, header=settings.api_key_header, metrics=metrics,
                           buckets=buckets, sent_on=sent_on)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Content-Type", "Authorization", settings.api_key_header],
            max_age=600,
        )
    if settings.max_connections is not None:
        app.add_middleware(
            AdmissionMiddleware, limit=settings.max_connections, retry_after_s=settings.retry_after_s, metrics=metrics
        )
    docs = {app.openapi_url, app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url} - {None}
    routers = (router, glossaries_router, libretranslate_router, deepl_router, deepl_v3_router)
    paths = {route.path for r in routers for route in r.routes} | docs
    app.add_middleware(MetricsMiddleware, metrics=metrics, paths=paths)
    for r in routers:
        app.include_router(r)
    return app
