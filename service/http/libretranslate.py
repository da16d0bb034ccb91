"""LibreTranslate's API, so that the tools translators already use work unchanged.

Base URL to give a LibreTranslate client: ``http://HOST:PORT/libretranslate/`` (Weblate's
LibreTranslate machinery, `libretranslatepy`'s ``LibreTranslateAPI(url)``, `deep-translator`'s
``LibreTranslator(custom_url=...)``). Under it, as LibreTranslate answers them:

- ``POST translate``: ``q`` (a string or, in JSON, a list), ``source`` (a code or ``auto``),
  ``target``, ``format`` (``text`` | ``html``), ``alternatives`` (how many more translations),
  ``api_key``; answers ``translatedText`` (a string or a list), ``alternatives`` when asked for,
  ``detectedLanguage`` for ``auto`` (per text, for a list). Two fields of this service's own:
  ``glossary`` (a stored glossary's id, or in JSON an object of source term -> target term) and
  ``placeholders`` (as in /translate); with a glossary the answer also holds ``glossary``, the
  compliance report per term. A third, ``model``, names which of the pair's models translates (as
  in /translate; absent: the pair's default).
- ``POST detect``: ``q``; answers the served languages, likeliest first, with a confidence 0-100.
- ``POST translate_file``: a multipart form with ``file`` (a gettext catalog, XLIFF, Qt Linguist,
  text, Markdown, HTML, Word, PowerPoint, Excel, OpenDocument, SubRip file, or a program's string resources: service/documents/), ``source`` (``auto``: the one the file names, else
  detected), ``target``, ``api_key``; answers ``translatedFileUrl`` once the file is translated, a
  ``GET download_file/...`` that answers the file with its untranslated texts translated (kept
  for the ``document_retention_s`` setting; ``translate_file`` waits at most 10 minutes, after which
  the URL answers 503 until the file is done). The document survives a restart of the server
  (service/document_store.py).
- ``GET languages``: each served source language with its ``targets``.
- ``GET frontend/settings``: what LibreTranslate's own web page reads.

Parameters come as the clients send them: a JSON body, a form-urlencoded body, or the query
string (deep-translator). Errors are ``{"error": "..."}``: 400 for a bad request (LibreTranslate's
own messages where it has one), 403 for a missing or wrong ``api_key`` when keys are configured,
429 when the key's rate limit or the server's queue says slow down (with Retry-After), 500 when
the translation failed.
"""
from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from service.errors import Rejected, RequestError, TranslationFailed, UnsupportedPair
from service.glossary import GlossaryEntry
from service.glossary_schemas import TermReportOut
from service.glossary_store import GlossaryInvalid, checked_entries
from service.http.auth import LIBRETRANSLATE_PREFIX
from service.document_store import DONE, ERROR
from service.document_worker import INTERNAL_FAILURE
from service.documents import FORMATS
from service.http.compatible import (DocumentRefused, KeyCheck, ParamsInvalid, document_store, file_headers, finished,
                                     queued, request_params, served_pairs, translate_each, uploaded)
from service.http.glossaries import glossary_store
from service.language_detection import Detection
from service.language_names import language_name
from service.protection.placeholders import PLACEHOLDER_STYLES
from service.http.replicas import not_held
from service.settings import MAX_BEAM_SIZE

log = logging.getLogger("service")

# Out of this service's OpenAPI schema: its shapes are LibreTranslate's (the module docstring).
router = APIRouter(prefix=LIBRETRANSLATE_PREFIX, include_in_schema=False)


class LibreError(Exception):
    """An answer LibreTranslate's way: ``{"error": message}`` with its status."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def _error(error: LibreError) -> JSONResponse:
    return JSONResponse({"error": error.message}, status_code=error.status, headers=error.headers)


async def _params(request: Request) -> dict[str, Any]:
    try:
        return await request_params(request)
    except ParamsInvalid as error:
        raise LibreError(400, str(error)) from None


def _required(params: dict[str, Any], name: str) -> Any:
    value = params.get(name)
    if value is None or value == "" or value == []:
        raise LibreError(400, f"Invalid request: missing {name} parameter")
    return value


def _texts(q: Any) -> tuple[list[str], bool]:
    if isinstance(q, str):
        return [q], True
    if isinstance(q, list) and all(isinstance(item, str) for item in q):
        return list(q), False
    raise LibreError(400, "Invalid request: q must be a string or a list of strings")


def _alternatives(value: Any) -> int:
    try:
        count = int(value)
    except (TypeError, ValueError):
        raise LibreError(400, "Invalid request: alternatives parameter is not a number") from None
    if isinstance(value, float) or not 0 <= count < MAX_BEAM_SIZE:
        raise LibreError(400, f"Invalid request: alternatives must be a whole number from 0 to {MAX_BEAM_SIZE - 1}")
    return count


def _glossary(request: Request, value: Any) -> list[GlossaryEntry]:
    """A stored glossary's id, or (JSON) an object of source term -> target term."""
    if value is None or value == "":
        return []
    if isinstance(value, dict):
        try:
            return list(checked_entries([GlossaryEntry(str(k), str(v)) for k, v in value.items()], "glossary"))
        except GlossaryInvalid as error:
            raise LibreError(400, f"Invalid request: {error}") from None
    if not isinstance(value, str):
        raise LibreError(400, "Invalid request: glossary must be a stored glossary's id or an object of terms")
    stored = glossary_store(request).get(value)
    if stored is None:
        raise LibreError(400, f"Invalid request: no glossary {value[:64]!r}", not_held("glossary"))
    return list(stored.entries)


async def _authorise(request: Request, api_key: Any) -> None:
    """LibreTranslate clients send their key as the api_key parameter: checked against the same
    keys and rate limits as the header (service/http/auth.py), answered LibreTranslate's way."""
    guard: KeyCheck | None = getattr(request.app.state, "api_keys", None)
    if guard is None:
        return
    status, retry = await guard.refusal(api_key if isinstance(api_key, str) else None, request.scope)
    if status == 403:
        raise LibreError(403, "Invalid API key")
    if status == 429:
        raise LibreError(429, f"Slowdown: rate limit of {guard.buckets.rate:g} requests/s exceeded; retry in {retry} s",
                         {"Retry-After": str(retry)})


def _detected(detection: Detection) -> dict[str, Any]:
    # LibreTranslate's confidence is a percentage.
    return {"language": detection.language, "confidence": round(detection.confidence * 100, 1)}


@router.post("/translate")
async def translate(request: Request) -> JSONResponse:
    params: dict[str, Any] = {}
    try:
        params = await _params(request)
        texts, single = _texts(_required(params, "q"))
        source = str(_required(params, "source")).strip().lower()
        target = str(_required(params, "target")).strip().lower()
        fmt = params.get("format") or "text"
        if fmt not in ("text", "html"):
            raise LibreError(400, f"{fmt} format is not supported")
        alternatives = _alternatives(params.get("alternatives", 0))
        await _authorise(request, params.get("api_key"))
        translator = request.app.state.lifecycle.translator_or_raise()
        glossary = _glossary(request, params.get("glossary"))
        styles = _styles(params.get("placeholders"))
        model = str(params["model"]) if params.get("model") not in (None, "") else None
        # source "auto": each text in the language detected for it, as LibreTranslate does; a text
        # already in the target language comes back as it is.
        detections = [translator.detector.detect(text) for text in texts] if source == "auto" else []
        if source == "auto" and any(d is None for d in detections):
            raise LibreError(400, "Invalid request: no served source language can be detected")
        served = await translate_each(translator, texts, None if source == "auto" else source, target, fmt,
                                      alternatives + 1, glossary, styles, model, detections)
    except LibreError as error:
        return _error(error)
    except Exception as error:  # noqa: BLE001 - every failure answers LibreTranslate's way
        return _error(_libre_error(error, params))
    body: dict[str, Any] = {}
    translated = [nbest[0].translation.text for nbest in served]
    body["translatedText"] = translated[0] if single else translated
    if alternatives:
        others = [[s.translation.text for s in nbest[1:]] for nbest in served]
        body["alternatives"] = others[0] if single else others
    if detections:
        detected = [_detected(d) for d in detections]
        body["detectedLanguage"] = detected[0] if single else detected
    if glossary:
        reports = [[TermReportOut.of(r).model_dump() for r in nbest[0].glossary] for nbest in served]
        body["glossary"] = reports[0] if single else reports
    return JSONResponse(body)


def _styles(value: Any) -> tuple[str, ...]:
    """This service's `placeholders` parameter: "auto" (or absent), "off", or styles comma-separated."""
    if value in (None, "", "auto"):
        return PLACEHOLDER_STYLES
    if value == "off":
        return ()
    styles = value if isinstance(value, list) else str(value).split(",")
    unknown = [s for s in styles if s not in PLACEHOLDER_STYLES]
    if unknown:
        raise LibreError(400, f"Invalid request: placeholders: unknown style {unknown[0]!r}; styles: "
                         + ", ".join(PLACEHOLDER_STYLES))
    return tuple(styles)


def _libre_error(error: Exception, params: dict[str, Any]) -> LibreError:
    """A domain error (service/errors.py) as LibreTranslate would answer it."""
    if isinstance(error, UnsupportedPair):
        return LibreError(400, f"{params.get(error.field, '')} is not supported")
    if isinstance(error, RequestError):
        where = "q" if error.field == "text" else error.field
        where += f".{error.index}" if error.index is not None else ""
        return LibreError(400, f"Invalid request: {where}: {error.message}")
    if isinstance(error, Rejected):
        headers = {"Retry-After": str(error.retry_after)} if error.retry_after else {}
        return LibreError(429, f"Slowdown: {error.message}", headers)
    if not isinstance(error, TranslationFailed):
        log.exception("LibreTranslate request failed")
    return LibreError(500, "Translation failed; details are in the server log")


@router.post("/detect")
async def detect(request: Request) -> JSONResponse:
    try:
        params = await _params(request)
        texts, _ = _texts(_required(params, "q"))
        await _authorise(request, params.get("api_key"))
        translator = request.app.state.lifecycle.translator_or_raise()
        ranked = translator.detect(" ".join(texts))
    except LibreError as error:
        return _error(error)
    except Exception as error:  # noqa: BLE001
        return _error(_libre_error(error, {}))
    return JSONResponse([_detected(d) for d in ranked])



@router.get("/languages")
async def languages(request: Request) -> JSONResponse:
    """Each served source language with the languages it translates into (LibreTranslate's form)."""
    targets: dict[str, list[str]] = {}
    for source, target in served_pairs(request):
        targets.setdefault(source, []).append(target)
    return JSONResponse([{"code": code, "name": language_name(code), "targets": sorted(targets[code])}
                         for code in sorted(targets)])


@router.get("/frontend/settings")
async def frontend_settings(request: Request) -> JSONResponse:
    settings = request.app.state.settings
    pairs = served_pairs(request)
    target = pairs[0][1] if pairs else "en"
    keys = bool(settings.api_keys)
    return JSONResponse({
        "charLimit": settings.max_chars, "frontendTimeout": 500, "apiKeys": keys, "keyRequired": keys,
        "suggestions": False, "filesTranslation": True, "supportedFilesFormat": list(FORMATS),
        "language": {"source": {"code": "auto", "name": "Auto Detect"},
                     "target": {"code": target, "name": language_name(target)}},
    })


FILE_WAIT_S = 600.0  # how long translate_file waits for its file before answering the URL all the same


@router.post("/translate_file")
async def translate_file(request: Request) -> JSONResponse:
    params: dict[str, Any] = {}
    try:
        params = await _params(request)
        source = str(_required(params, "source")).strip().lower()
        target = str(_required(params, "target")).strip().lower()
        await _authorise(request, params.get("api_key"))
        name, data = await uploaded(params)
        request.app.state.lifecycle.translator_or_raise()  # not ready: a 503 before the document is taken
        if target not in {served for _, served in served_pairs(request)}:
            raise LibreError(400, f"{target} is not supported")
        glossary = _glossary(request, params.get("glossary"))
        model = str(params["model"]) if params.get("model") not in (None, "") else None
        document = queued(request, name, data, None if source == "auto" else source, target, model, glossary)
        document = await finished(request, document, FILE_WAIT_S)
    except LibreError as error:
        return _error(error)
    except DocumentRefused as refused:
        return _error(LibreError(refused.status, f"Invalid request: {refused}"))
    except Exception as error:  # noqa: BLE001
        return _error(_libre_error(error, params))
    if document.status == ERROR:
        return _error(LibreError(500 if document.error == INTERNAL_FAILURE else 400, document.error or "failed"))
    url = request.url_for("download_file", filename=f"{document.id}.{document.name}")
    body: dict[str, Any] = {"translatedFileUrl": str(url)}
    if document.untranslated:  # this service's own: each text left as it was, and why
        body["untranslated"] = list(document.untranslated)
    return JSONResponse(body)


@router.get("/download_file/{filename}", name="download_file")
async def download_file(filename: str, request: Request) -> Response:
    """A translated file: its name is the document's id, a dot and the name it was sent with."""
    document_id = filename.split(".", 1)[0]
    store = document_store(request)
    document = store.get(document_id)
    if document is None:
        return _error(LibreError(404, "Not found: no such file (translated files are kept for a day)",
                                 not_held("document")))
    if document.status == ERROR:
        return _error(LibreError(400, document.error or "failed"))
    if document.status != DONE:
        return _error(LibreError(503, "The file is being translated; retry shortly", {"Retry-After": "5"}))
    return Response(store.output(document.id), headers=file_headers(document.name))
