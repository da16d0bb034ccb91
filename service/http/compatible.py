"""What the APIs compatible with other services' (LibreTranslate's, service/http/libretranslate.py;
DeepL's, service/http/deepl.py) share: reading a request's parameters as those services' clients
send them, checking a key they send their own way against the server's keys and rate limits,
translating texts each in its detected language, and taking documents to translate."""
from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qs, quote

from fastapi import Request
from starlette.types import Scope
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException

from service.document_store import DONE, ERROR, Document, DocumentStore
from service.documents import FORMATS, MEDIA_TYPES, format_of

from service.errors import QueueFull
from service.glossary import GlossaryEntry
from service.http.auth import KeyRing, SentOn, TokenBucket
from service.language_detection import Detection
from service.metrics import Metrics
from service.runtime.base import Translation
from service.served import Served
from service.translator import Translator


class ParamsInvalid(ValueError):
    """A body that cannot be read: its message says why, in the words LibreTranslate uses."""


async def request_params(request: Request) -> dict[str, Any]:
    """The query string's parameters, then the body's: a JSON object, form-urlencoded (a repeated
    name is a list: DeepL's clients send `text=a&text=b`) or multipart/form-data (a file sent is an
    UploadFile). A GET may carry a body too: DeepL's Python client sends `type=target` so."""
    params: dict[str, Any] = dict(request.query_params)
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "multipart/form-data":
        try:
            form = await request.form(max_files=1, max_fields=100)
        except (MultiPartException, UnicodeDecodeError, ValueError) as error:
            raise ParamsInvalid(f"Invalid request: the form cannot be read: {error}") from None
        for key in form:
            values = form.getlist(key)
            params[key] = values[0] if len(values) == 1 else values
        return params
    body = await request.body()
    if not body.strip():
        return params
    if content_type == "application/x-www-form-urlencoded":
        try:
            form = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        except UnicodeDecodeError:
            raise ParamsInvalid("Invalid request: the body is not UTF-8") from None
        params.update({key: values[0] if len(values) == 1 else values for key, values in form.items()})
        return params
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise ParamsInvalid("Invalid JSON format") from None
    if not isinstance(data, dict):
        raise ParamsInvalid("Invalid JSON format")
    params.update(data)
    return params


@dataclass(frozen=True)
class KeyCheck:
    """The server's API keys and rate limits, for the routes whose clients send the key their own
    way (a parameter, DeepL's `Authorization: DeepL-Auth-Key`): the middleware lets them pass."""

    ring: KeyRing
    buckets: TokenBucket | None
    metrics: Metrics
    sent_on: SentOn | None = None

    async def refusal(self, presented: str | None, scope: Scope) -> tuple[int, int | None]:
        """(0, None) for a known key with a token left (or a request another replica sent on, charged
        there); (403, None) for a missing or wrong key; (429, seconds to wait) for one whose rate limit is spent."""
        name = self.ring.identify(presented.encode("utf-8")) if presented else None
        if name is None:
            self.metrics.rejected("unauthorized")
            return 403, None
        if self.buckets is None or (self.sent_on is not None and await self.sent_on(scope)):
            return 0, None
        wait = self.buckets.take(name)
        if wait > 0:
            self.metrics.rejected("rate_limited")
            return 429, max(1, math.ceil(wait))
        return 0, None


async def translate_each(translator: Translator, texts: list[str], source: str | None, target: str, fmt: str,
                         n_best: int, glossary: list[GlossaryEntry], styles: tuple[str, ...], model: str | None,
                         detections: list[Detection] | None = None) -> list[list[Served]]:
    """Each text's n-best list, translated from `source`, or (None) from the language `detections`
    gives it, each language's texts in one batch; a text detected in the target language comes back
    as it is, as LibreTranslate's and DeepL's do."""
    options = replace(translator.defaults, n_best=n_best, beam_size=max(translator.defaults.beam_size, n_best),
                      alignment="none")
    languages = [d.language for d in detections] if source is None and detections else [source] * len(texts)
    served: list[list[Served]] = [[] for _ in texts]
    for language in dict.fromkeys(languages):
        indices = [k for k, lang in enumerate(languages) if lang == language]
        if language == target and source is None:
            for k in indices:
                served[k] = [Served(Translation(texts[k], 0.0), [])]
            continue
        group = await translator.translate([texts[k] for k in indices], language, target, options, fmt, (),
                                           glossary, styles, model)
        for k, nbest in zip(indices, group):
            served[k] = nbest
    return served


class DocumentRefused(ValueError):
    """A document that cannot be taken: (status, message)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def served_pairs(request: Request) -> list[tuple[str, str]]:
    """The (source, target) language pairs the server translates now (none while it loads)."""
    translator = request.app.state.lifecycle.translator
    return [tuple(pair.split("-", 1)) for pair in translator.pairs] if translator is not None else []


def document_store(request: Request) -> DocumentStore:
    return request.app.state.documents


async def uploaded(params: dict[str, Any], name: str | None = None) -> tuple[str, bytes]:
    """The file sent as the form's `file` field: its name (`name` where the client gives one apart,
    as DeepL's clients may) and its bytes; DocumentRefused for none, or one of no format the
    service reads."""
    file = params.get("file")
    if not isinstance(file, UploadFile):
        raise DocumentRefused(400, "missing file parameter (a form field holding the file)")
    filename = name if isinstance(name, str) and name.strip() else file.filename or ""
    filename = filename.replace("\\", "/").rsplit("/", 1)[-1].strip()  # a browser may send a path
    if format_of(filename) is None:
        raise DocumentRefused(400, f"file format not supported: {filename[:80]!r}; formats: {', '.join(FORMATS)}")
    data = await file.read()
    if not data:
        raise DocumentRefused(400, f"the file {filename[:80]!r} is empty")
    return filename, data


def queued(request: Request, name: str, data: bytes, source: str | None, target: str, model: str | None,
           glossary: list[GlossaryEntry]) -> Document:
    """The document stored and queued, the worker of this process told to look now; QueueFull where
    the server's documents waiting are at their limit."""
    store, limit = document_store(request), request.app.state.settings.max_documents_waiting
    if store.waiting() >= limit:  # each waits its turn for the one worker a process has: a flood would never end
        raise QueueFull(f"{limit} documents are waiting to be translated; retry later", retry_after=30)
    document = store.add(name, data, source, target, model, glossary)
    request.app.state.metrics.documents.labels(outcome="accepted").inc()
    request.app.state.document_worker.wake()
    return document


async def finished(request: Request, document: Document, timeout_s: float) -> Document:
    """The document once done or failed (whichever process translates it), or as it stands after
    `timeout_s`."""
    store, deadline, wait = document_store(request), time.monotonic() + timeout_s, 0.02
    while document.status not in (DONE, ERROR) and time.monotonic() < deadline:
        await asyncio.sleep(wait)
        wait = min(wait * 2, 0.5)
        document = await asyncio.to_thread(store.get, document.id) or document
    return document


def file_headers(name: str) -> dict[str, str]:
    """A translated file's headers: its media type (no charset: the file's own encoding stands, a
    catalog's in its header) and a Content-Disposition naming it (RFC 6266; a non-ASCII name as RFC
    5987 writes it)."""
    fallback = "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else "_" for c in name)
    return {"Content-Type": MEDIA_TYPES[format_of(name) or "text"],
            "Content-Disposition": f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"}
