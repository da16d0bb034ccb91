"""Fluent files (.ftl; Mozilla's Project Fluent: Firefox, Thunderbird, Pontoon), in the source language:
each message's value and attributes translated, a select expression's variants each on its own (its
selector and keys kept; text beside a select expression in the same pattern is left, which Fluent's
own guidance asks authors not to write), its placeables (`{ $user }`, `{ -brand-name }`, `{ NUMBER($n) }`) kept by the
service; a message holding tags (`<stress>{ $count }</stress>`, what DOM overlays read) is sent as html.
Terms (`-brand-name = Firefox`), comments and what Fluent cannot read (junk) are left. Read
by fluent.syntax (Mozilla's parser), each translation put where its pattern stood, every other
byte kept; a translation that would not read as the same pattern again (Fluent syntax at a line's
start, a placeable lost) is left and named.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Any

from service.documents.files import Failed, Spans, decoded

_SPACES = re.compile(r"\s+")
# A tag in a message: its markup is HTML (Fluent's DOM overlays, React's <Localized elems>), sent so
_TAG = re.compile(r"</?[A-Za-z][\w-]*(?:\s[^<>]*)?/?>")


def _patterns(pattern: Any, ast: Any) -> list[Any]:
    """The patterns of `pattern` translated each as one text: itself, or where it holds a select
    expression the patterns of its variants."""
    selects = [element.expression for element in pattern.elements
               if isinstance(element, ast.Placeable) and isinstance(element.expression, ast.SelectExpression)]
    if not selects:
        return [pattern]
    return [inner for select in selects for variant in select.variants for inner in _patterns(variant.value, ast)]


def _placeables(text: str, pattern: Any, ast: Any) -> Counter:
    """A pattern's placeables as written, whitespace aside."""
    return Counter(_SPACES.sub("", text[element.span.start:element.span.end]) for element in pattern.elements
                   if isinstance(element, ast.Placeable))


class FluentFile(Spans):
    fmt = "text"
    unit = "messages"
    source_language = ""
    unwritable_as = "would not read as the same Fluent pattern"

    def __init__(self, name: str, data: bytes, kind: str, fuzzy: bool) -> None:
        from fluent.syntax import FluentParser, ast  # only a Fluent file's reading needs it

        super().__init__()
        self.text, self.encoding = decoded(name, data)
        self.newline = "\r\n" if "\r\n" in self.text else "\n"  # the file's line ends, its translations' too
        self._parse = FluentParser(with_spans=True).parse
        self._ast = ast
        resource = self._parse(self.text)
        if not any(isinstance(entry, ast.Message) for entry in resource.body):
            raise Failed(f"cannot read {name}: no Fluent message in it")
        # per text: where its pattern stands, its indentation (a block pattern's) and its placeables
        self.formats: dict[str, str] = {}  # a text sent in another format than the file's: one with tags
        self.indents: dict[tuple[int, int], str] = {}
        self.placeables: dict[tuple[int, int], Counter] = {}
        for entry in resource.body:
            if not isinstance(entry, ast.Message):
                continue
            for pattern in [entry.value] * bool(entry.value) + [attribute.value for attribute in entry.attributes]:
                for inner in _patterns(pattern, ast):
                    start, end = inner.span.start, inner.span.end
                    raw = self.text[start:end]
                    lines = raw.split("\n")
                    indents = [len(line) - len(line.lstrip(" ")) for line in lines[1:] if line.strip()]
                    if lines[0].startswith(" "):
                        indents.append(len(lines[0]) - len(lines[0].lstrip(" ")))
                    indent = " " * min(indents) if indents else ""
                    value = "\n".join((line[len(indent):] if line.startswith(indent) else line.lstrip(" ")).rstrip("\r")
                                      for line in lines)
                    if not value.strip():
                        continue
                    self.spans.append((start, end, value))
                    if _TAG.search(value):
                        self.formats[value] = "html"
                    self.indents[(start, end)] = indent
                    self.placeables[(start, end)] = _placeables(self.text, inner, ast)

    def _put(self, translation: str, start: int, end: int) -> str:
        indent = self.indents[(start, end)]
        if not indent:  # a pattern of one line: its next lines four deeper than the line it starts on
            line = self.text[self.text.rfind("\n", 0, start) + 1:start]
            indent = " " * (len(line) - len(line.lstrip(" ")) + 4)
        lines = translation.strip().split("\n")
        block = self.text[start:end].startswith(" ")
        return self.newline.join((indent if k or block else "") + line.strip() for k, line in enumerate(lines))

    def _writable(self, value: str, start: int, end: int) -> bool:
        """Read again as a message's value: one pattern, no select expression, its placeables all there."""
        ast = self._ast
        message = "x =" + ("\n" if value.startswith(" ") else " ") + value + "\n"
        entries = self._parse(message).body
        return (len(entries) == 1 and isinstance(entries[0], ast.Message) and not entries[0].attributes
                and entries[0].value is not None
                and _placeables(message, entries[0].value, ast) == self.placeables[(start, end)]
                and not any(isinstance(element, ast.Placeable) and isinstance(element.expression, ast.SelectExpression)
                            for element in entries[0].value.elements))
