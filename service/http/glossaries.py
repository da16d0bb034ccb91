"""Stored glossaries over HTTP: POST /glossaries (201), GET /glossaries, GET and DELETE
/glossaries/{id} (404 for an id not stored), and the `glossary` field of a translate request
(a list of entries, or a stored glossary's id). The store is service/glossary_store.py."""
from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response

from service.errors import RequestError
from service.glossary import GlossaryEntry
from service.glossary_schemas import EntryIn, GlossaryCreate, GlossaryList, GlossaryOut
from service.glossary_store import GlossaryInvalid, GlossaryStore, checked_entries

router = APIRouter(tags=["glossaries"])


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
    return HTTPException(status_code=404, detail=f"no stored glossary has the id {glossary_id[:64]!r}")


@router.post("/glossaries", status_code=201, response_model=GlossaryOut)
async def create_glossary(body: GlossaryCreate, request: Request) -> GlossaryOut:
    """Store a glossary; it survives restarts (the glossary_db setting names its file)."""
    try:
        stored = glossary_store(request).create(body.name, body.source.lower(), body.target.lower(),
                                                body.glossary_entries())
    except GlossaryInvalid as error:
        raise RequestError(error.field, error.message, kind="invalid_glossary") from None
    return GlossaryOut.of(stored)


@router.get("/glossaries", response_model=GlossaryList)
async def list_glossaries(request: Request) -> GlossaryList:
    return GlossaryList(glossaries=[GlossaryOut.of(g) for g in glossary_store(request).list()])


@router.get("/glossaries/{glossary_id}", response_model=GlossaryOut, responses={404: {"description": "No such glossary."}})
async def get_glossary(glossary_id: str, request: Request) -> GlossaryOut:
    stored = glossary_store(request).get(glossary_id)
    if stored is None:
        raise _not_found(glossary_id)
    return GlossaryOut.of(stored)


@router.delete("/glossaries/{glossary_id}", status_code=204, responses={404: {"description": "No such glossary."}})
async def delete_glossary(glossary_id: str, request: Request) -> Response:
    if not glossary_store(request).delete(glossary_id):
        raise _not_found(glossary_id)
    return Response(status_code=204)
