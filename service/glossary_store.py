"""Stored glossaries: an embedded SQLite database (service/database.py), one file whose path is a
setting (`glossary_db`), so that glossaries survive restarts and are shared by every worker
process of a server on one machine.

A glossary is a name, a language pair and its entries (source term -> target term, in order). A
multilingual glossary (DeepL's v3 API) is a name and dictionaries, each a language pair's entries;
one request uses the dictionary of its pair.
Checks here are the domain's: a `GlossaryInvalid` names the entry and what is wrong; the web layer
turns it into a 422.
"""
from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
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
CREATE TABLE IF NOT EXISTS multilingual_glossaries (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS dictionary_entries (
    glossary_id TEXT NOT NULL REFERENCES multilingual_glossaries(id) ON DELETE CASCADE,
    source_lang TEXT NOT NULL,
    target_lang TEXT NOT NULL,
    position INTEGER NOT NULL,
    source TEXT NOT NULL,
    target TEXT NOT NULL,
    PRIMARY KEY (glossary_id, source_lang, target_lang, position)
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


@dataclass(frozen=True)
class Dictionary:
    """A multilingual glossary's entries for one language pair."""

    source: str
    target: str
    entries: tuple[GlossaryEntry, ...]


@dataclass(frozen=True)
class MultilingualGlossary:
    id: str
    name: str
    created: str  # ISO 8601, UTC
    dictionaries: tuple[Dictionary, ...]  # by language pair

    def dictionary(self, source: str, target: str) -> Dictionary | None:
        return next((d for d in self.dictionaries if (d.source, d.target) == (source, target)), None)


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
        with self._transaction() as db:
            db.execute("INSERT INTO glossaries VALUES (?, ?, ?, ?, ?)", (glossary.id, name, source, target, glossary.created))
            db.executemany("INSERT INTO entries VALUES (?, ?, ?, ?)",
                           [(glossary.id, k, e.source, e.target) for k, e in enumerate(glossary.entries)])
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

    # --- Multilingual glossaries (DeepL's v3 API)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """The connection, in one transaction that holds the file (BEGIN IMMEDIATE): what it reads
        stays so until it commits, for every process of a server."""
        with self._lock:
            db = self._connection()
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    @staticmethod
    def _dictionaries(dictionaries: Sequence[Dictionary], field: str = "dictionaries") -> list[Dictionary]:
        """Each dictionary checked (entries as `checked_entries`, at least one), a pair given once."""
        checked: list[Dictionary] = []
        for index, dictionary in enumerate(dictionaries):
            if any((d.source, d.target) == (dictionary.source, dictionary.target) for d in checked):
                raise GlossaryInvalid(f"{field}.{index}", f"the pair {dictionary.source}-{dictionary.target} is given twice")
            entries = checked_entries(dictionary.entries, f"{field}.{index}.entries")
            if not entries:
                raise GlossaryInvalid(f"{field}.{index}.entries", "must not be empty")
            checked.append(Dictionary(dictionary.source, dictionary.target, entries))
        return checked

    @staticmethod
    def _insert(db: sqlite3.Connection, glossary_id: str, dictionaries: Sequence[Dictionary]) -> None:
        db.executemany("INSERT INTO dictionary_entries VALUES (?, ?, ?, ?, ?, ?)",
                       [(glossary_id, d.source, d.target, k, e.source, e.target)
                        for d in dictionaries for k, e in enumerate(d.entries)])

    def create_multilingual(self, name: str, dictionaries: Sequence[Dictionary]) -> MultilingualGlossary:
        glossary = MultilingualGlossary(uuid.uuid4().hex, name, datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                        tuple(self._dictionaries(dictionaries)))
        with self._transaction() as db:
            db.execute("INSERT INTO multilingual_glossaries VALUES (?, ?, ?)", (glossary.id, name, glossary.created))
            self._insert(db, glossary.id, glossary.dictionaries)
        return glossary

    @staticmethod
    def _multilingual(db: sqlite3.Connection, where: str, values: Sequence) -> list[MultilingualGlossary]:
        """The multilingual glossaries `where` picks (oldest first), each with its dictionaries."""
        heads = db.execute(f"SELECT id, name, created FROM multilingual_glossaries {where} ORDER BY created, rowid",
                           values).fetchall()
        rows = db.execute(
            "SELECT glossary_id, source_lang, target_lang, source, target FROM dictionary_entries "
            f"WHERE glossary_id IN (SELECT id FROM multilingual_glossaries {where}) "
            "ORDER BY glossary_id, source_lang, target_lang, position", values).fetchall()
        pairs: dict[str, dict[tuple[str, str], list[GlossaryEntry]]] = {}
        for glossary_id, source_lang, target_lang, source, target in rows:
            pairs.setdefault(glossary_id, {}).setdefault((source_lang, target_lang), []).append(GlossaryEntry(source, target))
        return [MultilingualGlossary(*head, tuple(Dictionary(s, t, tuple(entries))
                                                  for (s, t), entries in pairs.get(head[0], {}).items()))
                for head in heads]

    def list_multilingual(self) -> list[MultilingualGlossary]:
        """Every multilingual glossary with its dictionaries, oldest first."""
        with self._lock:
            return self._multilingual(self._connection(), "", ())

    def get_multilingual(self, glossary_id: str) -> MultilingualGlossary | None:
        with self._lock:
            found = self._multilingual(self._connection(), "WHERE id = ?", (glossary_id,))
        return found[0] if found else None

    def update_multilingual(self, glossary_id: str, name: str | None, dictionaries: Sequence[Dictionary],
                            merge: bool) -> MultilingualGlossary | None:
        """`name` (None: as it is) and each dictionary given: its entries added to the pair's, a
        source term already there given its new target (`merge`, DeepL's PATCH), or the pair's
        replaced by them (DeepL's PUT). None where there is no such glossary. Read and written in
        one transaction: two merges at once both count."""
        with self._transaction() as db:
            found = self._multilingual(db, "WHERE id = ?", (glossary_id,))
            if not found:
                return None
            written = []
            for dictionary in dictionaries:
                held = found[0].dictionary(dictionary.source, dictionary.target)
                entries = list(dictionary.entries)
                if merge and held is not None:
                    given = {e.source.casefold(): e for e in entries}
                    entries = [given.pop(e.source.casefold(), e) for e in held.entries] + list(given.values())
                written.append(Dictionary(dictionary.source, dictionary.target, tuple(entries)))
            written = self._dictionaries(written)
            if name is not None:
                db.execute("UPDATE multilingual_glossaries SET name = ? WHERE id = ?", (name, glossary_id))
            for d in written:
                db.execute("DELETE FROM dictionary_entries WHERE glossary_id = ? AND source_lang = ? AND target_lang = ?",
                           (glossary_id, d.source, d.target))
            self._insert(db, glossary_id, written)
            return self._multilingual(db, "WHERE id = ?", (glossary_id,))[0]

    def delete_multilingual(self, glossary_id: str) -> bool:
        """Whether there was such a glossary."""
        with self._lock:
            return self._connection().execute("DELETE FROM multilingual_glossaries WHERE id = ?",
                                              (glossary_id,)).rowcount > 0

    def delete_dictionary(self, glossary_id: str, source: str, target: str) -> bool:
        """Whether the glossary had such a dictionary."""
        with self._lock:
            return self._connection().execute(
                "DELETE FROM dictionary_entries WHERE glossary_id = ? AND source_lang = ? AND target_lang = ?",
                (glossary_id, source, target)).rowcount > 0
