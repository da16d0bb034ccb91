"""Documents sent to be translated (LibreTranslate's translate_file, DeepL's v2/document): an
embedded SQLite database (service/database.py), one file whose path is a setting (`document_db`), so
that a document accepted is translated even if the server restarts meanwhile, and any worker
process of a server on one machine answers for it.

A document is queued when it arrives; a worker (service/document_worker.py) claims the oldest
queued one for `lease_s` seconds, renewed as it goes, and leaves it done (its translation stored)
or failed (why). A claim whose lease ran out, its worker gone, is claimed again, and at once one
whose process on this machine is dead (killed, crashed); a claim given up at shutdown is queued
again. Documents are kept `retention_s` after they arrived, then deleted.
"""
from __future__ import annotations

import json
import os
import secrets
import socket
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from service.database import Database
from service.glossary import GlossaryEntry

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    id TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    name TEXT NOT NULL,
    source TEXT,
    target TEXT NOT NULL,
    model TEXT,
    glossary TEXT NOT NULL,
    status TEXT NOT NULL,
    input BLOB NOT NULL,
    output BLOB,
    error TEXT,
    translated INTEGER NOT NULL DEFAULT 0,
    texts_done INTEGER NOT NULL DEFAULT 0,
    texts_total INTEGER NOT NULL DEFAULT 0,
    characters INTEGER NOT NULL DEFAULT 0,
    untranslated TEXT NOT NULL DEFAULT '[]',
    created REAL NOT NULL,
    started REAL,
    finished REAL,
    lease REAL NOT NULL DEFAULT 0,
    claim TEXT
);
CREATE INDEX IF NOT EXISTS documents_status ON documents (status, created);
"""

QUEUED, TRANSLATING, DONE, ERROR = "queued", "translating", "done", "error"


@dataclass(frozen=True)
class Document:
    """A document's state (its bytes are read apart: `input`, `output`)."""

    id: str
    key: str                # DeepL's document_key: what a client shows to read the document
    name: str
    source: str | None      # None: the file's, or detected
    target: str
    model: str | None
    glossary: tuple[GlossaryEntry, ...]
    status: str             # queued, translating, done, error
    error: str | None
    translated: int         # messages, segments, paragraphs or subtitles translated (when done)
    texts_done: int
    texts_total: int
    characters: int         # characters of the texts sent to be translated (when done)
    untranslated: tuple[str, ...]  # each text left as it was, and why (when done)
    created: float          # seconds since the epoch
    started: float | None
    finished: float | None

    def seconds_remaining(self, now: float) -> int | None:
        """An estimate from the pace so far; None before there is one."""
        if self.status != TRANSLATING or not self.started or not self.texts_done or not self.texts_total:
            return None
        elapsed = max(now - self.started, 0.0)
        return max(0, round(elapsed * (self.texts_total - self.texts_done) / self.texts_done))


@dataclass(frozen=True)
class Claim:
    """A worker's hold on a document: its state, its bytes and the token its writes must show."""

    document: Document
    input: bytes
    token: str


_COLUMNS = ("id, key, name, source, target, model, glossary, status, error, translated, texts_done, texts_total, "
            "characters, untranslated, created, started, finished")


def _document(row: Sequence) -> Document:
    values = list(row)
    values[6] = tuple(GlossaryEntry(source, target) for source, target in json.loads(values[6]))
    values[13] = tuple(json.loads(values[13]))
    return Document(*values)


_HOST = socket.gethostname()


def _dead_here(holder: str | None) -> bool:
    """Whether a claim was made by a process of this machine that is no more."""
    host, _, rest = (holder or "").partition(":")
    pid = rest.partition(":")[0]
    if host != _HOST or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        return False
    return False


class DocumentStore(Database):
    """Opened on first use: a server (or a test) that is never sent a document creates no file."""

    def __init__(self, path: Path | str, lease_s: float = 60.0, retention_s: float = 86_400.0) -> None:
        super().__init__(path, _SCHEMA)
        self.lease_s, self.retention_s = lease_s, retention_s

    def add(self, name: str, data: bytes, source: str | None, target: str, model: str | None = None,
            glossary: Sequence[GlossaryEntry] = ()) -> Document:
        """A document queued to be translated."""
        document_id, key = uuid.uuid4().hex, secrets.token_urlsafe(24)
        terms = json.dumps([[entry.source, entry.target] for entry in glossary], ensure_ascii=False)
        with self._lock:
            self._connection().execute(
                "INSERT INTO documents (id, key, name, source, target, model, glossary, status, input, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (document_id, key, name, source, target, model, terms, QUEUED, data, time.time()))
        found = self.get(document_id)
        assert found is not None
        return found

    def get(self, document_id: str) -> Document | None:
        if not self.exists():  # asked of a server never sent a document: no file made for the question
            return None
        with self._lock:
            row = self._connection().execute(f"SELECT {_COLUMNS} FROM documents WHERE id = ?",
                                             (document_id,)).fetchone()
        return _document(row) if row is not None else None

    def output(self, document_id: str) -> bytes | None:
        """A done document's translation."""
        if not self.exists():
            return None
        with self._lock:
            row = self._connection().execute("SELECT output FROM documents WHERE id = ? AND status = ?",
                                             (document_id, DONE)).fetchone()
        return bytes(row[0]) if row is not None else None

    def claim(self) -> Claim | None:
        """The oldest document queued, or whose worker is gone (its lease ran out, or its process on
        this machine is dead: a server restarted takes up at once what it was translating), now held
        by the caller."""
        now, token = time.time(), f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex}"
        with self._lock:
            db = self._connection()
            db.execute("BEGIN IMMEDIATE")  # no other process claims the same one meanwhile
            try:
                held = db.execute("SELECT id, claim FROM documents WHERE status = ? AND lease >= ?",
                                  (TRANSLATING, now)).fetchall()
                orphans = [document_id for document_id, holder in held if _dead_here(holder)]
                row = db.execute(
                    f"SELECT {_COLUMNS}, input FROM documents WHERE status = ? OR (status = ? AND lease < ?) "
                    f"OR id IN ({', '.join('?' * len(orphans))}) ORDER BY created LIMIT 1",
                    (QUEUED, TRANSLATING, now, *orphans)).fetchone()
                if row is not None:
                    db.execute("UPDATE documents SET status = ?, claim = ?, lease = ?, started = ?, texts_done = 0 "
                               "WHERE id = ?", (TRANSLATING, token, now + self.lease_s, now, row[0]))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        if row is None:
            return None
        document = _document(row[:-1])
        return Claim(document, bytes(row[-1]), token)

    def _update(self, claim: Claim, assignments: str, values: tuple) -> bool:
        """Whether the claim still held (another worker may have taken a document whose lease ran out)."""
        with self._lock:
            changed = self._connection().execute(
                f"UPDATE documents SET {assignments} WHERE id = ? AND claim = ? AND status = ?",
                values + (claim.document.id, claim.token, TRANSLATING)).rowcount
        return changed > 0

    def progress(self, claim: Claim, done: int, total: int) -> bool:
        """Texts translated so far; the lease renewed."""
        return self._update(claim, "texts_done = ?, texts_total = ?, lease = ?", (done, total, time.time() + self.lease_s))

    def finish(self, claim: Claim, output: bytes, translated: int, characters: int,
               untranslated: Sequence[str] = ()) -> bool:
        return self._update(claim, "status = ?, output = ?, translated = ?, characters = ?, untranslated = ?, "
                            "finished = ?, claim = NULL",
                            (DONE, output, translated, characters, json.dumps(list(untranslated), ensure_ascii=False),
                             time.time()))

    def fail(self, claim: Claim, message: str) -> bool:
        return self._update(claim, "status = ?, error = ?, finished = ?, claim = NULL", (ERROR, message, time.time()))

    def release(self, claim: Claim) -> bool:
        """The document queued again (its worker stops), for the next worker to claim at once."""
        return self._update(claim, "status = ?, claim = NULL, lease = 0, started = NULL, texts_done = 0", (QUEUED,))

    def waiting(self) -> int:
        """Documents queued or being translated."""
        if not self.exists():
            return 0
        with self._lock:
            return self._connection().execute("SELECT COUNT(*) FROM documents WHERE status IN (?, ?)",
                                              (QUEUED, TRANSLATING)).fetchone()[0]

    def purge(self) -> int:
        """Documents older than the retention deleted; how many."""
        with self._lock:
            return self._connection().execute("DELETE FROM documents WHERE created < ?",
                                              (time.time() - self.retention_s,)).rowcount
