"""DeepL's API (v2, and v3's glossaries), so that tools that call DeepL at a server they are given work unchanged.

Base URL to give a DeepL client: ``http://HOST:PORT/deepl/`` (deepl-python's
``deepl.Translator(auth_key, server_url="http://HOST:PORT/deepl/")``; tools whose DeepL settings
take an API URL). Under it, as DeepL answers them:

- ``POST v2/translate``: ``text`` (a list; in a form, the name repeated), ``target_lang`` (``DE``,
  ``EN-US``, ``EN-GB``, ``FR``: a regional variant is its language), ``source_lang`` (absent: each
  text's detected), ``tag_handling`` (``xml`` or ``html``: the texts are markup, read as the
  service reads it), ``glossary_id`` (a stored glossary); answers ``translations``, per text its
  ``text``, ``detected_source_language`` and ``billed_characters`` (its length). Accepted and
  without effect: ``split_sentences`` and ``preserve_formatting`` (the service cuts sentences and
  keeps the layout itself), ``formality``, ``context``, ``outline_detection``, ``splitting_tags``,
  ``non_splitting_tags``, ``show_billed_characters``, ``model_type``. ``ignore_tags`` (with
  ``tag_handling``) names elements whose content is not translated: each is passed through as the
  service passes through an element marked ``translate="no"``. This service's own: ``model``, which
  of the pair's models translates.
- ``POST v2/document``: a multipart form with ``file`` (a gettext catalog, XLIFF, Qt Linguist, text,
  Markdown, HTML, Word, PowerPoint, Excel, OpenDocument, SubRip file, or a program's string resources: service/documents/; ``filename`` names it where the part does not),
  ``target_lang``, ``source_lang`` (absent: the one the file names, else detected), ``glossary_id``,
  ``output_format`` (only the file's own); answers ``document_id`` and ``document_key``. ``POST
  v2/document/{id}`` with ``document_key``: its ``status`` (``queued``, ``translating`` with
  ``seconds_remaining``, ``done`` with ``billed_characters``, ``error`` with ``error_message``);
  ``POST v2/document/{id}/result``: the translated file (503 until it is done). Documents outlive a
  restart (service/document_store.py) and are kept for the ``document_retention_s`` setting.
- ``GET`` (or ``POST``) ``v2/languages`` with ``type`` ``source`` (default) or ``target``: the
  served languages, English as a target as ``EN-GB`` and ``EN-US``, as DeepL lists it.
- ``GET v2/usage``: the characters this process translated through this API (no limit).
- ``GET v2/glossary-language-pairs``; ``POST v2/glossaries`` (``name``, ``source_lang``,
  ``target_lang``, ``entries`` in ``entries_format`` ``tsv`` or ``csv``), ``GET v2/glossaries``,
  ``GET`` and ``DELETE v2/glossaries/{id}``, ``GET v2/glossaries/{id}/entries`` (tab-separated):
  the service's stored glossaries, the ones /glossaries serves (service/glossary_store.py).
- v3's multilingual glossaries (DeepLClient's): ``POST v3/glossaries`` (``name``, ``dictionaries``: each
  ``source_lang``, ``target_lang``, ``entries`` in ``entries_format``), ``GET v3/glossaries``, ``GET``,
  ``PATCH`` (``name`` and/or ``dictionaries``, each merged into its pair's: a term given anew takes its
  new target) and ``DELETE v3/glossaries/{id}``, ``GET v3/glossaries/{id}/entries`` and ``DELETE
  v3/glossaries/{id}/dictionaries`` with ``source_lang`` and ``target_lang``, ``PUT
  v3/glossaries/{id}/dictionaries`` (one dictionary, replaced). A ``glossary_id`` of v3 translates with
  the dictionary of the request's pair (a 400 where it has none).

Where the server has API keys, the key comes as DeepL's clients send it, ``Authorization:
DeepL-Auth-Key <key>`` (or ``auth_key``, DeepL's older parameter), checked against the same keys
and rate limits as every route's. Errors are ``{"message": ...}``: 400 a bad request, 403 a missing
or wrong key, 404 no such glossary or document, 413 a document over the size limit, 429 slow down
(with Retry-After), 500 a failed translation, 503 not ready (or a document not yet translated).
"""
from __future__ import annotations

import csv
import functools
import io
import itertools
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from service.errors import QueueFull, Rejected, RequestError, TranslationFailed, UnsupportedPair
from service.glossary import GlossaryEntry
from service.glossary_store import Dictionary, GlossaryInvalid, MultilingualGlossary, StoredGlossary
from service.http.auth import DEEPL_PREFIX
from service.document_store import DONE, ERROR, QUEUED, Document
from service.documents import format_of
from service.http.compatible import (DocumentRefused, KeyCheck, ParamsInvalid, document_store, file_headers, queued,
                                     request_params, served_pairs, translate_each, uploaded)
from service.http.glossaries import glossary_store
from service.language_names import language_name
from service.protection.placeholders import PLACEHOLDER_STYLES
from service.http.replicas import LISTING, not_held

log = logging.getLogger("service")

router = APIRouter(prefix=DEEPL_PREFIX + "/v2", include_in_schema=False)
# DeepL's v3 glossaries: several language pairs' dictionaries in one (DeepLClient's multilingual glossaries)
router_v3 = APIRouter(prefix=DEEPL_PREFIX + "/v3", include_in_schema=False)

# How DeepL lists a target language it writes in regional variants.
_REGIONAL = {"en": ("EN-GB", "EN-US"), "pt": ("PT-BR", "PT-PT"), "zh": ("ZH-HANS", "ZH-HANT")}
_FORMATS = {None: "text", "": "text", "xml": "xml", "html": "html"}


class DeepLError(Exception):
    """An answer DeepL's way: ``{"message": message}`` with its status."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}

    def response(self) -> JSONResponse:
        return JSONResponse({"message": self.message}, status_code=self.status, headers=self.headers)


def _failure(error: Exception) -> DeepLError:
    """A domain error (service/errors.py) as DeepL would answer it."""
    if isinstance(error, DeepLError):
        return error
    if isinstance(error, UnsupportedPair):
        return DeepLError(400, f"Value for '{error.field}_lang' not supported.")
    if isinstance(error, RequestError):
        where = error.field + (f".{error.index}" if error.index is not None else "")
        return DeepLError(400, f"Bad request: {where}: {error.message}")
    if isinstance(error, Rejected):
        # A full queue is DeepL's "too many requests"; anything else turned away whole is unavailability.
        headers = {"Retry-After": str(error.retry_after)} if error.retry_after else {}
        if isinstance(error, QueueFull):
            return DeepLError(429, f"Too many requests: {error.message}", headers)
        return DeepLError(503, f"Service unavailable: {error.message}", headers)
    if isinstance(error, ParamsInvalid):
        return DeepLError(400, f"Bad request: {error}")
    if isinstance(error, DocumentRefused):
        return DeepLError(error.status, f"Bad request: {error}")
    if not isinstance(error, TranslationFailed):  # that one the translator has logged
        log.exception("DeepL request failed")
    return DeepLError(500, "Internal error; details are in the server log")


def _answered(route: Callable[..., Awaitable[Response]]) -> Callable[..., Awaitable[Response]]:
    """A route whose every failure answers DeepL's way (`_failure`)."""
    @functools.wraps(route)
    async def answer(*args: Any, **kwargs: Any) -> Response:
        try:
            return await route(*args, **kwargs)
        except Exception as error:  # noqa: BLE001 - every failure answers DeepL's way
            return _failure(error).response()
    return answer


async def _checked(request: Request) -> dict[str, Any]:
    """The request's parameters, once its key (where the server has keys) is one of them."""
    params = await request_params(request)
    guard: KeyCheck | None = getattr(request.app.state, "api_keys", None)
    if guard is not None:
        header = request.headers.get("authorization", "")
        presented = header[len("DeepL-Auth-Key "):].strip() if header.startswith("DeepL-Auth-Key ") else None
        auth_key = params.get("auth_key")
        status, retry = await guard.refusal(presented or (auth_key if isinstance(auth_key, str) else None),
                                            request.scope)
        if status == 403:
            raise DeepLError(403, "Authorization failure: missing or wrong key (Authorization: DeepL-Auth-Key KEY)")
        if status == 429:
            raise DeepLError(429, "Too many requests: this key's rate limit is spent", {"Retry-After": str(retry)})
    return params


def _language(code: Any, name: str) -> str:
    """A DeepL language code as the service's: `EN-US` is `en`."""
    if code is None or code == "":
        raise DeepLError(400, f"Parameter '{name}' not specified.")
    if not isinstance(code, str) or not code.strip():
        raise DeepLError(400, f"Value for '{name}' not supported.")
    return code.strip().split("-")[0].lower()



@router.post("/translate")
@_answered
async def translate(request: Request) -> Response:
    params = await _checked(request)
    texts = params.get("text")
    if isinstance(texts, str):
        texts = [texts]
    if not texts:
        raise DeepLError(400, "Parameter 'text' not specified.")
    if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
        raise DeepLError(400, "Parameter 'text' must be a string or a list of strings.")
    target = _language(params.get("target_lang"), "target_lang")
    source = _language(params["source_lang"], "source_lang") if params.get("source_lang") else None
    handling = params.get("tag_handling")
    fmt = _FORMATS.get(handling) if handling is None or isinstance(handling, str) else None
    if fmt is None:
        raise DeepLError(400, "Value for 'tag_handling' not supported.")
    translator = request.app.state.lifecycle.translator_or_raise()
    glossary = _glossary(request, params.get("glossary_id"), source, target)
    model = str(params["model"]) if params.get("model") not in (None, "") else None
    detections = [translator.detector.detect(text) for text in texts] if source is None else []
    if source is None and any(d is None for d in detections):
        raise DeepLError(400, "Bad request: no served source language can be detected; give source_lang")
    ignored = _tag_names(params.get("ignore_tags")) if fmt != "text" else set()
    sent = [_marked(text, ignored) for text in texts] if ignored else texts
    served = await translate_each(translator, sent, source, target, fmt, 1, glossary, PLACEHOLDER_STYLES,
                                  model, detections)
    request.app.state.deepl_characters = getattr(request.app.state, "deepl_characters", 0) + sum(map(len, texts))
    languages = [d.language for d in detections] if detections else [source] * len(texts)
    return JSONResponse({"translations": [
        {"detected_source_language": language.upper(), "text": nbest[0].translation.text.replace(_IGNORED, ""),
         "billed_characters": len(text)}
        for text, language, nbest in zip(texts, languages, served)]})


# What marks an element `ignore_tags` names: the service passes an element with `translate="no"`
# through byte for byte, and the second attribute tells the mark from one the text had.
_IGNORED = ' translate="no" data-deepl-ignored=""'


def _tag_names(value: Any) -> set[str]:
    """DeepL's tag list: comma-separated, or (JSON) a list of such."""
    values = value if isinstance(value, list) else [value] if isinstance(value, str) else []
    return {name.strip() for item in values if isinstance(item, str) for name in item.split(",") if name.strip()}


def _marked(text: str, names: set[str]) -> str:
    """`text` with the opening tag of each element named in `names` marked `_IGNORED`."""
    pattern = re.compile(r"<(" + "|".join(map(re.escape, sorted(names))) + r")(?=[\s/>])")
    return pattern.sub(lambda m: m.group(0) + _IGNORED, text)


def _glossary(request: Request, glossary_id: Any, source: str | None, target: str) -> list[GlossaryEntry]:
    if glossary_id in (None, ""):
        return []
    if source is None:
        raise DeepLError(400, "Bad request: a glossary needs source_lang")
    stored = glossary_store(request).get(str(glossary_id))
    if stored is None:
        multilingual = glossary_store(request).get_multilingual(str(glossary_id))
        if multilingual is None:
            raise DeepLError(400, f"Bad request: no glossary {str(glossary_id)[:64]!r}", not_held("glossary"))
        dictionary = multilingual.dictionary(source, target)
        if dictionary is None:
            raise DeepLError(400, f"Bad request: glossary {multilingual.id} has no {source}-{target} dictionary")
        return list(dictionary.entries)
    if (stored.source, stored.target) != (source, target):
        raise DeepLError(400, f"Bad request: glossary {stored.id} is {stored.source}-{stored.target}, "
                              f"not {source}-{target}")
    return list(stored.entries)


@router.api_route("/languages", methods=["GET", "POST"])
@_answered
async def languages(request: Request) -> Response:
    params = await _checked(request)
    pairs = served_pairs(request)
    if params.get("type", "source") == "target":
        codes = sorted({code for _, target in pairs for code in _REGIONAL.get(target, (target.upper(),))})
        return JSONResponse([{"language": code, "name": _name(code), "supports_formality": False} for code in codes])
    return JSONResponse([{"language": source.upper(), "name": language_name(source)}
                         for source in sorted({source for source, _ in pairs})])


def _name(code: str) -> str:
    base, _, region = code.partition("-")
    name = language_name(base.lower())
    return f"{name} ({region})" if region else name


@router.api_route("/usage", methods=["GET", "POST"])
@_answered
async def usage(request: Request) -> Response:
    await _checked(request)
    return JSONResponse({"character_count": getattr(request.app.state, "deepl_characters", 0)})


@router.get("/glossary-language-pairs")
@_answered
async def glossary_language_pairs(request: Request) -> Response:
    await _checked(request)
    return JSONResponse({"supported_languages": [{"source_lang": source, "target_lang": target}
                                                 for source, target in sorted(served_pairs(request))]})


def _info(stored: StoredGlossary) -> dict[str, Any]:
    created = datetime.fromisoformat(stored.created)
    return {"glossary_id": stored.id, "name": stored.name, "ready": True, "source_lang": stored.source,
            "target_lang": stored.target, "creation_time": created.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "entry_count": len(stored.entries)}


def _entries(text: Any, entries_format: Any) -> list[GlossaryEntry]:
    """A glossary's entries as DeepL takes them: a line per entry, source and target term apart by a
    tab (tsv) or a comma (csv, quoted as CSV quotes)."""
    if not isinstance(text, str) or not text.strip():
        raise DeepLError(400, "Parameter 'entries' not specified.")
    if entries_format in (None, "", "tsv"):
        rows = [line.split("\t") for line in text.splitlines() if line.strip()]
    elif entries_format == "csv":
        rows = [row for row in csv.reader(io.StringIO(text)) if row]
    else:
        raise DeepLError(400, "Value for 'entries_format' not supported.")
    for number, row in zip(itertools.count(1), rows):
        if len(row) < 2:
            raise DeepLError(400, f"Bad request: entry {number} has no target term")
    return [GlossaryEntry(row[0], row[1]) for row in rows]


def _glossary_name(params: dict[str, Any]) -> str:
    name = params.get("name")
    if not isinstance(name, str) or not name.strip():
        raise DeepLError(400, "Parameter 'name' not specified.")
    return name.strip()


_Stored = TypeVar("_Stored")


def _checked_glossary(store: Callable[[], _Stored]) -> _Stored:
    """What `store` stores, or a 400 naming the entry the store refused."""
    try:
        return store()
    except GlossaryInvalid as error:
        raise DeepLError(400, f"Bad request: {error}") from None


@router.post("/glossaries", status_code=201)
@_answered
async def create_glossary(request: Request) -> Response:
    params = await _checked(request)
    name = _glossary_name(params)
    source = _language(params.get("source_lang"), "source_lang")
    target = _language(params.get("target_lang"), "target_lang")
    entries = _entries(params.get("entries"), params.get("entries_format"))
    stored = _checked_glossary(lambda: glossary_store(request).create(name, source, target, entries))
    return JSONResponse(_info(stored), status_code=201)


@router.get("/glossaries")
@_answered
async def list_glossaries(request: Request) -> Response:
    await _checked(request)
    return JSONResponse({"glossaries": [_info(stored) for stored in glossary_store(request).list()]}, headers=LISTING)


def _found(glossary: _Stored | None) -> _Stored:
    """The glossary, or DeepL's 404 (which another replica may answer: service/http/replicas.py)."""
    if glossary is None:
        raise DeepLError(404, "Glossary not found", not_held("glossary"))
    return glossary


def _stored(request: Request, glossary_id: str) -> StoredGlossary:
    return _found(glossary_store(request).get(glossary_id))


@router.get("/glossaries/{glossary_id}")
@_answered
async def get_glossary(glossary_id: str, request: Request) -> Response:
    await _checked(request)
    stored = _stored(request, glossary_id)
    return JSONResponse(_info(stored))


@router.get("/glossaries/{glossary_id}/entries")
@_answered
async def glossary_entries(glossary_id: str, request: Request) -> Response:
    await _checked(request)
    stored = _stored(request, glossary_id)
    return Response("\n".join(f"{e.source}\t{e.target}" for e in stored.entries),
                    media_type="text/tab-separated-values")


@router.delete("/glossaries/{glossary_id}", status_code=204)
@_answered
async def delete_glossary(glossary_id: str, request: Request) -> Response:
    await _checked(request)
    _found(glossary_store(request).delete(glossary_id) or None)
    return Response(status_code=204)


@router.post("/document")
@_answered
async def upload_document(request: Request) -> Response:
    params = await _checked(request)
    target = _language(params.get("target_lang"), "target_lang")
    source = _language(params["source_lang"], "source_lang") if params.get("source_lang") else None
    name, data = await uploaded(params, params.get("filename"))
    wanted = params.get("output_format")
    if wanted not in (None, "") and (not isinstance(wanted, str) or format_of("." + wanted) != format_of(name)):
        raise DeepLError(400, "Value for 'output_format' not supported: a document is written in its own format.")
    request.app.state.lifecycle.translator_or_raise()  # not ready: a 503 before the document is taken
    if target not in {served for _, served in served_pairs(request)}:
        raise DeepLError(400, "Value for 'target_lang' not supported.")
    glossary = _glossary(request, params.get("glossary_id"), source, target)
    model = str(params["model"]) if params.get("model") not in (None, "") else None
    document = queued(request, name, data, source, target, model, glossary)
    return JSONResponse({"document_id": document.id, "document_key": document.key})


def _document(request: Request, document_id: str, params: dict[str, Any]) -> Document:
    """The document the id names, where the key shown is its key."""
    document, key = document_store(request).get(document_id), params.get("document_key")
    if document is None:
        raise DeepLError(404, "Document not found", not_held("document"))
    if not isinstance(key, str) or not secrets.compare_digest(key.encode(), document.key.encode()):
        raise DeepLError(404, "Document not found")
    return document


@router.post("/document/{document_id}")
@_answered
async def document_status(document_id: str, request: Request) -> Response:
    document = _document(request, document_id, await _checked(request))
    body: dict[str, Any] = {"document_id": document.id, "status": document.status}
    remaining = document.seconds_remaining(time.time())
    if remaining is not None:
        body["seconds_remaining"] = remaining
    if document.status == DONE:
        body["billed_characters"] = document.characters
        if document.untranslated:  # this service's own: each text left as it was, and why
            body["untranslated"] = list(document.untranslated)
    if document.status == ERROR:
        body["error_message"] = document.error
    return JSONResponse(body)


@router.post("/document/{document_id}/result")
@_answered
async def document_result(document_id: str, request: Request) -> Response:
    document = _document(request, document_id, await _checked(request))
    if document.status == ERROR:
        raise DeepLError(400, f"Bad request: the document was not translated: {document.error}")
    if document.status != DONE:
        waiting = "is queued" if document.status == QUEUED else "is being translated"
        raise DeepLError(503, f"Document not ready: it {waiting}", {"Retry-After": "1"})
    return Response(document_store(request).output(document.id), headers=file_headers(document.name))


# --- v3: multilingual glossaries


def _multilingual_info(glossary: MultilingualGlossary) -> dict[str, Any]:
    created = datetime.fromisoformat(glossary.created)
    return {"glossary_id": glossary.id, "name": glossary.name,
            "dictionaries": [{"source_lang": d.source, "target_lang": d.target, "entry_count": len(d.entries)}
                             for d in glossary.dictionaries],
            "creation_time": created.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}


def _dictionary(value: Any, field: str) -> Dictionary:
    if not isinstance(value, dict):
        raise DeepLError(400, f"Bad request: {field} must be an object with source_lang, target_lang and entries")
    return Dictionary(_language(value.get("source_lang"), "source_lang"), _language(value.get("target_lang"), "target_lang"),
                      tuple(_entries(value.get("entries"), value.get("entries_format"))))


def _dictionaries(params: dict[str, Any], required: bool) -> list[Dictionary]:
    given = params.get("dictionaries")
    if given is None and not required:
        return []
    if not isinstance(given, list) or (required and not given):
        raise DeepLError(400, "Parameter 'dictionaries' not specified.")
    return [_dictionary(value, f"dictionaries[{k}]") for k, value in enumerate(given)]


def _pair(params: dict[str, Any]) -> tuple[str, str]:
    return _language(params.get("source_lang"), "source_lang"), _language(params.get("target_lang"), "target_lang")


def _multilingual(request: Request, glossary_id: str) -> MultilingualGlossary:
    return _found(glossary_store(request).get_multilingual(glossary_id))


@router_v3.post("/glossaries", status_code=201)
@_answered
async def create_multilingual_glossary(request: Request) -> Response:
    params = await _checked(request)
    name, dictionaries = _glossary_name(params), _dictionaries(params, required=True)
    glossary = _checked_glossary(lambda: glossary_store(request).create_multilingual(name, dictionaries))
    return JSONResponse(_multilingual_info(glossary), status_code=201)


@router_v3.get("/glossaries")
@_answered
async def list_multilingual_glossaries(request: Request) -> Response:
    await _checked(request)
    return JSONResponse({"glossaries": [_multilingual_info(g) for g in glossary_store(request).list_multilingual()]},
                        headers=LISTING)


@router_v3.get("/glossaries/{glossary_id}")
@_answered
async def get_multilingual_glossary(glossary_id: str, request: Request) -> Response:
    await _checked(request)
    return JSONResponse(_multilingual_info(_multilingual(request, glossary_id)))


@router_v3.get("/glossaries/{glossary_id}/entries")
@_answered
async def multilingual_glossary_entries(glossary_id: str, request: Request) -> Response:
    params = await _checked(request)
    source, target = _pair(params)
    dictionary = _multilingual(request, glossary_id).dictionary(source, target)
    if dictionary is None:
        raise DeepLError(404, f"Dictionary not found: the glossary has no {source}-{target} dictionary")
    return JSONResponse({"dictionaries": [{"source_lang": source, "target_lang": target, "entries_format": "tsv",
                                           "entries": "\n".join(f"{e.source}\t{e.target}" for e in dictionary.entries)}]})


async def _updated(request: Request, glossary_id: str, name: Any, dictionaries: list[Dictionary], merge: bool) -> MultilingualGlossary:
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise DeepLError(400, "Value for 'name' not supported.")
    return _found(_checked_glossary(lambda: glossary_store(request).update_multilingual(
        glossary_id, name.strip() if name else None, dictionaries, merge)))


@router_v3.patch("/glossaries/{glossary_id}")
@_answered
async def update_multilingual_glossary(glossary_id: str, request: Request) -> Response:
    """Its name and/or dictionaries: each one given merged into the pair's (a term given anew takes
    the new target)."""
    params = await _checked(request)
    dictionaries = _dictionaries(params, required=False)
    if params.get("name") is None and not dictionaries:
        raise DeepLError(400, "Bad request: give a name or dictionaries to update")
    return JSONResponse(_multilingual_info(await _updated(request, glossary_id, params.get("name"), dictionaries, True)))


@router_v3.put("/glossaries/{glossary_id}/dictionaries")
@_answered
async def replace_multilingual_dictionary(glossary_id: str, request: Request) -> Response:
    params = await _checked(request)
    dictionary = _dictionary(params, "the body")
    await _updated(request, glossary_id, None, [dictionary], False)
    return JSONResponse({"source_lang": dictionary.source, "target_lang": dictionary.target,
                         "entry_count": len(dictionary.entries)})


@router_v3.delete("/glossaries/{glossary_id}", status_code=204)
@_answered
async def delete_multilingual_glossary(glossary_id: str, request: Request) -> Response:
    await _checked(request)
    _found(glossary_store(request).delete_multilingual(glossary_id) or None)
    return Response(status_code=204)


@router_v3.delete("/glossaries/{glossary_id}/dictionaries", status_code=204)
@_answered
async def delete_multilingual_dictionary(glossary_id: str, request: Request) -> Response:
    params = await _checked(request)
    source, target = _pair(params)
    _multilingual(request, glossary_id)
    if not glossary_store(request).delete_dictionary(glossary_id, source, target):
        raise DeepLError(404, f"Dictionary not found: the glossary has no {source}-{target} dictionary")
    return Response(status_code=204)
