"""Stored glossaries: an embedded SQLite database (service/database.py), one file whose path is a
setting (`glossary_db`), so that glossaries survive restarts and are shared by every worker
process of a server on one machine.

A glossary is a name, a language pair and its entries (source term -> target term, in order).
Checks here are the domain's: a `GlossaryInvalid` names the entry and what is wrong; the web layer
turns it into a 422.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from service.database import Database
from service.glossary import MAX_ENTRIES, MAX_TERM_CHARS, GlossaryEntry

_SCHEMA = """
CREATE TABLE IF NOT EXISTS glossaries (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
    glossary_id TEXT NOT NULL REFERENCES glossaries(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    PRIMARY KEY (glossary_id, position)
);
"""


class GlossaryInvalid(ValueError):
    """Entries that cannot make a glossary: `field` names the one at fault ("entries.2.source")."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class StoredGlossary:
    id: str
    name: str
    source: str
    target: str
    created: str  # ISO 8601, UTC
    entries: tuple[GlossaryEntry, ...]


def checked_entries(entries: Iterable[GlossaryEntry], field: str = "entries") -> tuple[GlossaryEntry, ...]:
    """The entries, trimmed, or `GlossaryInvalid` for the first bad one: empty or over-long terms,
    too many entries, one source term (ignoring case, as matching does) listed twice."""
    out: list[GlossaryEntry] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        if index >= MAX_ENTRIES:
            raise GlossaryInvalid(field, f"at most {MAX_ENTRIES} entries per glossary")
        source, target = " ".join(entry.source.split()), entry.target.strip()
        for side, term in (("source", source), ("target", target)):
            if not term:
                raise GlossaryInvalid(f"{field}.{index}.{side}", "must not be empty")
            if len(term) > MAX_TERM_CHARS:
                raise GlossaryInvalid(f"{field}.{index}.{side}", f"at most {MAX_TERM_CHARS} characters, got {len(term)}")
        key = source.casefold()
        if key in seen:
            raise GlossaryInvalid(f"{field}.{index}.source", f"{source!r} is already entry {seen[key]}")
        seen[key] = index
        out.append(GlossaryEntry(source, target))
    return tuple(out)


class GlossaryStore(Database):
    """Opened on first use: a server (or a test) that never touches a glossary creates no file."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(path, _SCHEMA, foreign_keys=True)

    def create(self, name: str, source: str, target: str, entries: Sequence[GlossaryEntry]) -> StoredGlossary:
        glossary = StoredGlossary(uuid.uuid4().hex, name, source, target,
                                  datetime.now(timezone.utc).isoformat(timespec="seconds"), checked_entries(entries))
        with self._lock:
            db = self._connection()
            db.execute("BEGIN")
            try:
                db.execute("INSERT INTO glossaries VALUES (?, ?, ?, ?, ?)", (glossary.id, name, source, target, glossary.created))
                db.executemany("INSERT INTO entries VALUES (?, ?, ?, ?)",
                               [(glossary.id, k, e.source, e.target) for k, e in enumerate(glossary.entries)])
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return glossary

    def list(self) -> list[StoredGlossary]:
        """Every glossary with its entries, oldest first."""
        with self._lock:
            heads = self._connection().execute("SELECT id, name, source, target, created FROM glossaries "
                                     "ORDER BY created, rowid").fetchall()
            rows = self._connection().execute("SELECT glossary_id, source, target FROM entries ORDER BY glossary_id, position").fetchall()
        entries: dict[str, list[GlossaryEntry]] = {}
        for glossary_id, source, target in rows:
            entries.setdefault(glossary_id, []).append(GlossaryEntry(source, target))
        return [StoredGlossary(*head, tuple(entries.get(head[0], []))) for head in heads]

    def get(self, glossary_id: str) -> StoredGlossary | None:
        with self._lock:
            head = self._connection().execute("SELECT id, name, source, target, created FROM glossaries WHERE id = ?",
                                    (glossary_id,)).fetchone()
            if head is None:
                return None
            rows = self._connection().execute("SELECT source, target FROM entries WHERE glossary_id = ? ORDER BY position",
                                    (glossary_id,)).fetchall()
        return StoredGlossary(*head, tuple(GlossaryEntry(*row) for row in rows))

    def delete(self, glossary_id: str) -> bool:
        """Whether there was such a glossary."""
        with self._lock:
            return self._connection().execute("DELETE FROM glossaries WHERE id = ?", (glossary_id,)).rowcount > 0
