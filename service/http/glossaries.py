"""Stored glossaries over HTTP: POST /glossaries (201), GET /glossaries, GET and DELETE
/glossaries/{id} (404 for an id not stored), and the `glossary` field of a translate request
(a list of entries, or a stored glossary's id). The store is service/glossary_store.py."""
from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response

from service.errors import RequestError
from service.glossary import GlossaryEntry
from service.glossary_schemas import EntryIn, GlossaryCreate, GlossaryList, GlossaryOut
from service.glossary_store import GlossaryInvalid, GlossaryStore, checked_entries
from service.http.replicas import LISTING, not_held
from service.schemas import ErrorResponse

router = APIRouter(tags=["glossaries"])


def _error(description: str) -> dict:
    return {"model": ErrorResponse, "description": description}


_ERRORS = {
    400: _error("The body is not parseable JSON."),
    401: _error("API keys are on and the request has no valid one."),
    408: _error("The body did not arrive within body_timeout_s."),
    413: _error("The body is larger than max_body_bytes."),
    415: _error("The content type is not application/json."),
    422: _error("Invalid glossary; the message names the entry and what is wrong."),
    429: _error("The API key's rate limit is exhausted; see Retry-After."),
}
_NOT_FOUND = {401: _ERRORS[401], 404: _error("No stored glossary has this id."), 429: _ERRORS[429]}


def glossary_store(request: Request) -> GlossaryStore:
    return request.app.state.glossaries


def request_glossary(request: Request, field: list[EntryIn] | str | None) -> list[GlossaryEntry]:
    """The entries a translate request's `glossary` field stands for."""
    if field is None:
        return []
    if isinstance(field, str):
        stored = glossary_store(request).get(field)
        if stored is None:
            raise RequestError("glossary", f"no stored glossary has the id {field!r}", kind="unknown_glossary")
        return list(stored.entries)
    try:
        return list(checked_entries([GlossaryEntry(e.source, e.target) for e in field], "glossary"))
    except GlossaryInvalid as error:
        raise RequestError(error.field, error.message, kind="invalid_glossary") from None


def _not_found(glossary_id: str) -> HTTPException:
    return HTTPException(status_code=404, detail=f"no stored glossary has the id {glossary_id[:64]!r}",
                         headers=not_held("glossary"))


@router.post("/glossaries", status_code=201, response_model=GlossaryOut, responses=_ERRORS)
async def create_glossary(body: GlossaryCreate, request: Request) -> GlossaryOut:
    """Store a glossary; it survives restarts (the glossary_db setting names its file)."""
    try:
        stored = glossary_store(request).create(body.name, body.source.lower(), body.target.lower(),
                                                body.glossary_entries())
    except GlossaryInvalid as error:
        raise RequestError(error.field, error.message, kind="invalid_glossary") from None
    return GlossaryOut.of(stored)


@router.get("/glossaries", response_model=GlossaryList, responses={401: _ERRORS[401], 429: _ERRORS[429]})
async def list_glossaries(request: Request, response: Response) -> GlossaryList:
    response.headers.update(LISTING)  # every replica's, where there are several (service/http/replicas.py)
    return GlossaryList(glossaries=[GlossaryOut.of(g) for g in glossary_store(request).list()])


@router.get("/glossaries/{glossary_id}", response_model=GlossaryOut, responses=_NOT_FOUND)
async def get_glossary(glossary_id: str, request: Request) -> GlossaryOut:
    stored = glossary_store(request).get(glossary_id)
    if stored is None:
        raise _not_found(glossary_id)
    return GlossaryOut.of(stored)


@router.delete("/glossaries/{glossary_id}", status_code=204, responses=_NOT_FOUND)
async def delete_glossary(glossary_id: str, request: Request) -> Response:
    if not glossary_store(request).delete(glossary_id):
        raise _not_found(glossary_id)
    return Response(status_code=204)
