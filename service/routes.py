"""HTTP routes: transport only — parse, one call of the Translator, render."""

from __future__ import annotations

import asyncio
from pathlib import Path
from collections.abc import Awaitable
from typing import TypeVar

import anyio.to_thread
from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from service.errors import CutOff
from service.http.errors import ONE_TEXT, ClientDisconnected
from service.http.page_policy import page_policy
from service.lifecycle import Lifecycle
from service.metrics import Metrics
from service.schemas import (
    AlignmentOut,
    AlignRequest,
    AlignResponse,
    ErrorResponse,
    HealthResponse,
    LiveResponse,
    MemoriesResponse,
    MemoryInfoOut,
    ModelOut,
    ModelsResponse,
    TranslateRequest,
    TranslateResponse,
)
from service.http.glossaries import request_glossary
from service.served import Served
from service.translator import Answer, Translator

router = APIRouter()
T = TypeVar("T")


def _error(description: str) -> dict:
    return {"model": ErrorResponse, "description": description}


_ERRORS = {
    400: _error(
        "The body is not parseable JSON (a syntax error, invalid UTF-8, nested too deep), or a bad Content-Length."
    ),
    401: _error("API keys are on and the request has no valid one."),
    408: _error("The body did not arrive within body_timeout_s."),
    413: _error("The body is larger than max_body_bytes."),
    415: _error("The content type is not application/json."),
    422: _error("Invalid request; the message names the field (and the limit, when one was passed)."),
    429: _error("The API key's rate limit is exhausted; see Retry-After."),
    500: _error("Translation failed; details are in the server log."),
    503: _error(
        "Not ready (loading, failed, draining, the model's process restarting) or too busy (queue full, "
        "deadline in queue); see Retry-After."
    ),
    504: _error("The deadline passed while the model was computing."),
}


async def get_translator(request: Request) -> Translator:
    # async: FastAPI runs a plain-def dependency in its thread pool (40 threads), so every
    # request paid a thread hop for an attribute read, and under a flood queued for a thread.
    lifecycle: Lifecycle = request.app.state.lifecycle
    return lifecycle.translator_or_raise()


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Await ``work`` unless the client disconnects first: then cancel it (which takes the
    request's texts out of the queue) and raise ``ClientDisconnected``.

    Once the body has been read, the ASGI ``receive`` has nothing more to say until the client
    disconnects (or the response is sent), so a task waiting on it hears the disconnect.
    """
    task = asyncio.ensure_future(work)

    async def watch() -> None:
        try:
            while True:
                message = await request.receive()
                if message["type"] == "http.disconnect":
                    return
        except Exception:
            # A server whose receive cannot be watched: wait for the work alone.
            await asyncio.get_running_loop().create_future()

    watcher = asyncio.ensure_future(watch())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        # Also on our own cancellation (shutdown timeout): neither task may outlive the request.
        watcher.cancel()
        if not task.done():
            task.cancel()
            try:
                await task
            except BaseException:
                pass
    if task.cancelled():
        raise ClientDisconnected()
    return task.result()


@router.post(
    "/translate",
    response_model=TranslateResponse,
    response_model_exclude_none=True,  # "alignment" only when asked for
    responses=_ERRORS,
)
async def translate(
    body: TranslateRequest, request: Request, translator: Translator = Depends(get_translator)
) -> TranslateResponse | Response:
    setattr(request.state, ONE_TEXT, isinstance(body.text, str))
    glossary = request_glossary(request, body.glossary)
    work = translator.translate_any(body.texts, body.source, body.target, body.decoding_options(translator.defaults),
                                    body.format, body.do_not_translate, glossary, body.styles, model=body.model,
                                    memory=body.memory)
    try:
        answer = await unless_disconnected(request, work)
        if _answer_cost(answer.results, body.alignment) <= _RENDER_INLINE_COST:
            return TranslateResponse.from_results(answer.source, body.target, answer.model, body.texts,
                                                  answer.results, answer.detected)
        # A large answer (64 texts x 16-best with phrase maps is 15 MB of JSON) is built in a
        # thread: on the event loop it would stall every other request and the health checks for
        # as long as it takes; beside a thread the loop still gets the GIL every few milliseconds.
        payload = await anyio.to_thread.run_sync(_render, body, answer)
    except asyncio.CancelledError:
        # uvicorn cancels what is still in flight when the drain timeout expires: say so (and
        # when to retry) instead of leaving the client a bare 500 or a cut connection.
        if request.app.state.lifecycle.stopping:
            raise CutOff() from None
        raise
    return Response(content=payload, media_type="application/json")


@router.post("/align", response_model=AlignResponse, responses=_ERRORS)
async def align(
    body: AlignRequest, request: Request, translator: Translator = Depends(get_translator)
) -> AlignResponse:
    """Word alignments of translations the client already has: each forced through the model."""
    setattr(request.state, ONE_TEXT, isinstance(body.text, str))
    work = translator.align(body.texts, body.translations, body.source, body.target, body.alignment_method, body.model)
    model, method, alignments = await unless_disconnected(request, work)
    return AlignResponse(source=body.source, target=body.target, model=model, alignment_method=method,
                         alignments=[AlignmentOut.from_alignment(alignment, flags) for alignment, flags in alignments])


# Characters of hypothesis text, weighted up when alignments come with them, below which the
# answer is built on the event loop (a thread hop costs more than the build).
_RENDER_INLINE_COST = 20_000


def _answer_cost(results: list[list[Served]], alignment: str) -> int:
    chars = sum(len(served.translation.text) + 16 for nbest in results for served in nbest)
    return chars if alignment == "none" else chars * 20


def _render(body: TranslateRequest, answer: Answer) -> bytes:
    """What FastAPI would send for the route's response_model (exclude_none), as bytes."""
    response = TranslateResponse.from_results(answer.source, body.target, answer.model, body.texts, answer.results,
                                              answer.detected)
    return response.model_dump_json(exclude_none=True).encode()


def _health(lifecycle: Lifecycle) -> JSONResponse:
    translator = lifecycle.translator
    phase, reason = lifecycle.health()
    if phase == "ready" and translator is not None:
        return JSONResponse(content={"status": "ok", "phase": "ready", "pairs": translator.pairs})
    body = {"status": "unavailable", "phase": phase, "pairs": [], "reason": reason}
    return JSONResponse(status_code=503, content=body)


@router.get("/models", response_model=ModelsResponse, responses={503: _ERRORS[503]})
async def models(translator: Translator = Depends(get_translator)) -> ModelsResponse:
    """The models served: per model its name (what a request's "model" names), pair, domain, measured
    scores, whether it may answer a request naming none, and its kind; per pair what answers such a
    request (a name, or "auto" where the texts choose by domain)."""
    models = translator.models
    defaults = {model.pair: translator.default_name(model.key) for model in models}
    return ModelsResponse(models=[ModelOut.of(model, translator.is_default(model)) for model in models], defaults=defaults)


@router.get("/memories", response_model=MemoriesResponse, responses={503: _ERRORS[503]})
async def memories(translator: Translator = Depends(get_translator)) -> MemoriesResponse:
    """The translation memories served (service/memory.py): per memory its name and how many sources it
    answers per served direction. A /translate request's plain-text sentence or line that one holds is
    answered from it unless the request says "memory": false."""
    served = set(translator.pairs)
    return MemoriesResponse(memories=[
        MemoryInfoOut(name=memory.name, directions={pair: n for pair, n in memory.sizes().items() if pair in served})
        for memory in translator.memories.memories])


@router.get("/health/ready", response_model=HealthResponse, responses={503: {"model": HealthResponse}})
async def ready(request: Request) -> Response:
    """200 when the models are loaded and warm and the server is not draining; 503 with the
    reason otherwise. Route traffic by this one."""
    return _health(request.app.state.lifecycle)


@router.get("/health", response_model=HealthResponse, responses={503: {"model": HealthResponse}})
async def health(request: Request) -> Response:
    """The same as /health/ready, at the path probes and load balancers try by default."""
    return _health(request.app.state.lifecycle)


@router.get("/health/live", response_model=LiveResponse)
async def live() -> LiveResponse:
    """200 while the process serves HTTP at all, loaded or not: restart only when this fails."""
    return LiveResponse(status="ok")


@router.get("/", include_in_schema=False)
async def page() -> Response:
    """The page: type a text, see its translations and hover a word to see where it came from."""
    return Response(content=_PAGE, media_type="text/html; charset=utf-8", headers=_PAGE_HEADERS)


# service/static/index.html: one self-contained file, no build step.
_PAGE = (Path(__file__).parent / "static" / "index.html").read_bytes()
_PAGE_HEADERS = {"Content-Security-Policy": page_policy(_PAGE.decode("utf-8")), "X-Content-Type-Options": "nosniff"}


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    registry: Metrics = request.app.state.metrics
    return Response(content=registry.render(), media_type=registry.content_type)


# HEAD on the health checks and /metrics (some load balancers probe with HEAD): the status and
# headers of GET without the body. Starlette routes (/docs) answer HEAD by themselves; FastAPI's
# do not (405). Kept out of the schema: they say nothing GET does not.
for _path, _endpoint in (("/health/ready", ready), ("/health", health), ("/health/live", live), ("/metrics", metrics)):
    router.add_api_route(_path, _endpoint, methods=["HEAD"], include_in_schema=False)
