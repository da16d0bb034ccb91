"""String tables (.csv, .tsv): a header row naming each column's language, a row per string, as
Godot reads translations (`keys,en,de`: service/documents/__init__.py's FORMATS) and Unity's
Localization exports them (`Key,Id,English(en),French(fr)`). The source language's column is read
(a column whose header is its code, or ends in it in parentheses), and each row's empty cell in the
target's column gets the translation of the row's source cell; a file with no column for the target
gets one, at the end, headed as the source's is (`de`, or `German(de)`). Keys, ids, comments (a
header starting with `_`, Godot's) and every other cell stay byte for byte, quoted as written; a
translation is quoted where the file quotes every cell or where it must be (a delimiter, a quote,
a line break). Godot's plural rows (`?plural`): the row's cell gets the singular's translation, and
the rows below it (their first cell empty) the plural's, as many as the target's gettext plural
forms ask (rows added where the file has fewer)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from service.documents.files import Failed, decoded
from service.documents.plurals import gettext_header
from service.served import spliced

# A header naming a language: its code, or a name with the code in parentheses (Unity's "English(en)")
_CODE = re.compile(r"^\s*(?:[^()]*\(\s*)?([A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*)\s*\)?\s*$")


@dataclass(frozen=True)
class _Cell:
    start: int
    end: int
    value: str


@dataclass(frozen=True)
class _Row:
    cells: tuple[_Cell, ...]
    end: int          # where its line break (or the file) starts


def _language(header: str) -> str | None:
    """The language a column's header names, or None (a key, an id, a comment, a special column)."""
    if header.startswith(("_", "?")):
        return None
    match = _CODE.match(header)
    if match is None or ("(" not in header and not re.split(r"[-_]", match.group(1))[0].islower()):
        return None  # a bare code is lower-case, as Godot's locales are: "Id" is Unity's id column
    from babel import Locale, UnknownLocaleError

    code = match.group(1).replace("-", "_")
    try:
        Locale.parse(code)
    except (UnknownLocaleError, ValueError):
        return None
    return code.split("_")[0].lower()


class StringTable:
    fmt = "text"
    unit = "strings"
    marks = ""
    target_language = ""

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        self.name = name
        self.text, self.encoding = decoded(name, data)
        first_line = self.text.split("\n", 1)[0]
        self.delimiter = "\t" if name.lower().endswith(".tsv") else \
            ";" if first_line.count(";") > first_line.count(",") else ","
        self.rows = self._rows()
        if not self.rows:
            raise Failed(f"cannot read {name}: no header row")
        self.headers = [cell.value for cell in self.rows[0].cells]
        self.languages = {k: code for k, header in enumerate(self.headers) if (code := _language(header))}
        if not self.languages:
            raise Failed(f"cannot read {name}: no column's header names a language (keys,en,de as Godot reads it)")
        self.source_language = self.languages[min(self.languages)]
        self.quoted = all(self.text[cell.start] == '"' for cell in self.rows[0].cells if cell.end > cell.start)
        self.plural_column = next((k for k, header in enumerate(self.headers) if header.strip() == "?plural"), None)
        self.source_column: int | None = None
        self.target_column: int | None = None
        self.target = ""
        self.forms = 1

    def _rows(self) -> list[_Row]:
        """The file's rows, each cell where it stands and what it reads as (RFC 4180's quoting)."""
        text, delimiter, rows, at = self.text, self.delimiter, [], 0
        plain = re.compile(f"[{re.escape(delimiter)}\r\n]")
        while at < len(text):
            cells = []
            while True:
                start = at
                if text.startswith('"', at):
                    close = at + 1
                    while True:
                        close = text.find('"', close)
                        if close < 0:
                            line = text.count("\n", 0, start) + 1
                            raise Failed(f"cannot read {self.name}: the quoted cell on line {line} is never closed")
                        if text.startswith('""', close):
                            close += 2
                            continue
                        break
                    at = close + 1
                    value = text[start + 1:close].replace('""', '"')
                    if at < len(text) and text[at] not in delimiter + "\r\n":
                        line = text.count("\n", 0, start) + 1
                        raise Failed(f"cannot read {self.name}: line {line} has text after a quoted cell's closing quote")
                else:
                    found = plain.search(text, at)
                    at = found.start() if found else len(text)
                    value = text[start:at]
                cells.append(_Cell(start, at, value))
                if text.startswith(delimiter, at):
                    at += len(delimiter)
                    continue
                break
            rows.append(_Row(tuple(cells), at))
            at += 2 if text.startswith("\r\n", at) else 1 if text.startswith(("\n", "\r"), at) else 0
        return rows

    def for_target(self, target: str, source: str) -> None:
        """The columns of `source` and `target`: the source's must be there."""
        self.target = target
        columns = [k for k, code in self.languages.items() if code == source]
        if not columns:
            raise Failed(f"{self.name} has no column for {source!r}; its languages: "
                         + ", ".join(dict.fromkeys(self.languages.values())))
        self.source_column = columns[0]
        self.target_column = next((k for k, code in self.languages.items() if code == target), None)
        header = gettext_header(target)
        self.forms = header[0] if header and self.plural_column is not None else 1

    def _cell(self, row: _Row, column: int | None) -> str:
        return row.cells[column].value if column is not None and column < len(row.cells) else ""

    def _units(self) -> list[tuple[int, str, bool]]:
        """Each text to translate: its row, the text, whether it is a plural's (its rows below)."""
        if self.source_column is None:  # before for_target: the first language's column
            self.source_column = min(self.languages)
        found = []
        for index, row in enumerate(self.rows[1:], 1):
            if not row.cells[0].value.strip() and self.plural_column is not None and self.plural_column != 0:
                continue  # a plural's row of further forms: filled from its row above
            text = self._cell(row, self.source_column)
            if text.strip() and not self._cell(row, self.target_column).strip():
                found.append((index, text, False))
            plural = self._cell(row, self.plural_column)
            if plural.strip() and self.forms > 1:
                found.append((index, plural, True))
        return found

    @property
    def texts(self) -> list[str]:
        return [text for _, text, _ in self._units()]

    def _quoted(self, value: str) -> str:
        if self.quoted or any(c in value for c in (self.delimiter, '"', "\n", "\r")) or value != value.strip():
            return '"' + value.replace('"', '""') + '"'
        return value

    def written(self, translated: dict[str, str], mark: bool, target: str) -> tuple[bytes, int]:
        width = len(self.headers)
        column = self.target_column if self.target_column is not None else width  # a new column: the last
        newline = "\r\n" if "\r\n" in self.text else "\n"
        singular: dict[int, str] = {}
        plurals: dict[int, str] = {}
        for index, text, plural in self._units():
            if text in translated:
                (plurals if plural else singular)[index] = translated[text]
        edits: list[tuple[int, int, str]] = []
        for index, row in enumerate(self.rows):
            if index == 0 and self.target_column is None:
                edits.append(self._put(row, column, self._header()))
            elif self.target_column is None or index in singular:
                edits.append(self._put(row, column, singular.get(index)))
            if index not in plurals:
                continue
            below = []  # the plural's further forms: the rows below it whose first cell is empty
            for k in range(index + 1, len(self.rows)):
                if self.rows[k].cells[0].value.strip():
                    break
                below.append(k)
            for k in below[:self.forms - 1]:
                if not self._cell(self.rows[k], column).strip():
                    edits.append(self._put(self.rows[k], column, plurals[index]))
            columns = max(width, column + 1)
            edits += [(self.rows[below[-1] if below else index].end,) * 2 + (
                newline + self.delimiter * column + self._quoted(plurals[index]) + self.delimiter * (columns - column - 1),)
                for _ in range(self.forms - 1 - len(below))]
        return spliced(self.text, sorted(edits, key=lambda edit: edit[:2])).encode(self.encoding), \
            len(singular) + len(plurals)

    def _put(self, row: _Row, column: int, value: str | None) -> tuple[int, int, str]:
        """The edit writing `value` (None: nothing) in the row's cell of `column`: over the cell, or
        after the row's last one (the cells between empty)."""
        written = self._quoted(value) if value is not None else ""
        if column < len(row.cells):
            return row.cells[column].start, row.cells[column].end, written
        return row.end, row.end, self.delimiter * (column - len(row.cells) + 1) + written

    def _header(self) -> str:
        """The new column's header, in the source's style: its code, or a name and the code (Unity's)."""
        source = self.headers[self.source_column if self.source_column is not None else min(self.languages)]
        if "(" not in source:
            return self.target
        from babel import Locale

        return f"{Locale.parse(self.target).get_display_name('en')}({self.target})"

