"""HTTP routes: transport only — parse, delegate to the Translator, serialise."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse

from service.errors import NotReady
from service.metrics import Metrics
from service.schemas import ErrorResponse, HealthResponse, TranslateRequest, TranslateResponse
from service.translator import Translator

router = APIRouter()

_ERRORS = {
    422: {"model": ErrorResponse, "description": "Invalid request; the message names the field."},
    500: {"model": ErrorResponse, "description": "Translation failed; details are in the server log."},
    503: {"model": ErrorResponse, "description": "Models are not loaded yet."},
}


def get_translator(request: Request) -> Translator:
    translator = getattr(request.app.state, "translator", None)
    if translator is None:
        raise NotReady()
    return translator


@router.post(
    "/translate",
    response_model=TranslateResponse,
    response_model_exclude_none=True,  # "alignment" only when asked for
    responses=_ERRORS,
)
async def translate(body: TranslateRequest, translator: Translator = Depends(get_translator)) -> TranslateResponse:
    results = await translator.translate(
        body.texts,
        body.source,
        body.target,
        beam_size=body.beam_size,
        n_best=body.n_best,
        alignment=body.alignment,
        single=isinstance(body.text, str),
    )
    return TranslateResponse.from_results(body.source, body.target, results)


@router.get("/health", response_model=HealthResponse, responses={503: {"model": HealthResponse}})
async def health(request: Request) -> Response:
    translator: Translator | None = getattr(request.app.state, "translator", None)
    if translator is None:
        return JSONResponse(status_code=503, content={"status": "unavailable", "pairs": []})
    return JSONResponse(content={"status": "ok", "pairs": translator.pairs})


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request) -> Response:
    registry: Metrics = request.app.state.metrics
    return Response(content=registry.render(), media_type=registry.content_type)
