"""An embedded SQLite database in one file, opened on first use (a server, or a test, that never
needs it creates no file), shared by the threads of a process under one lock and by the processes
of a server on one machine (WAL journal: readers never wait for a writer). The glossary store and
the document store are such files."""
from __future__ import annotations

import sqlite3
import threading
from pathlib import Path


class Database:
    def __init__(self, path: Path | str, schema: str, foreign_keys: bool = False) -> None:
        self.path = str(path)
        self._schema, self._foreign_keys = schema, foreign_keys
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def exists(self) -> bool:
        """Whether the database may hold anything: it is open, or its file is there (another
        process's, or one from before a restart)."""
        return self._db is not None or (self.path != ":memory:" and Path(self.path).is_file())

    def _connection(self) -> sqlite3.Connection:
        # Called with the lock held.
        if self._db is None:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            # another process's write holds the file a moment: wait for it rather than fail
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30.0)
            if self._foreign_keys:
                db.execute("PRAGMA foreign_keys = ON")
            if self.path != ":memory:":
                db.execute("PRAGMA journal_mode = WAL")
            db.executescript(self._schema)
            self._db = db
        return self._db

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
