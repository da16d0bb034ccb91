"""ICU MessageFormat's plural and select arguments, translated branch by branch.

"{count, plural, one {# file selected} other {# files selected}}" was one placeholder, kept as
written: its English branches came back untranslated. Now a plain text with one `plural`,
`selectordinal` or `select` argument is translated as one whole sentence per branch, the text
around the argument put into each: "You have {n, plural, one {one message} other {# messages}}."
comes back "{n, plural, one {Sie haben eine Nachricht.} other {Sie haben # Nachrichten.}}", what
ICU's guidance asks of messages (whole sentences in each branch, so that a translation may order
its words its own way) and the same message to a program. A plural branch's `#`, the number, is a
placeholder in its sentence (style ICU_NUMBER). Left one placeholder, as before: a text with more
than one such argument, a branch holding another, ICU's apostrophe quoting (`'{'`), a line break,
or the argument written against a word.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from service.layout import Block, Kept, Layout, Segment
from service.protection.placeholders import ICU_NUMBER, Protected, find_protected
from service.runtime.base import has_visible_text

_HEADER = re.compile(r"\{\s*[A-Za-z0-9_]+\s*,\s*(plural|selectordinal|select)\s*,\s*(?:offset\s*:\s*\d+\s*)?")
_KEY = re.compile(r"\s*(?:=\d+|[A-Za-z0-9_-]+)\s*\{")
_NESTED = re.compile(r"\{\s*[A-Za-z0-9_]+\s*,\s*(?:plural|selectordinal|select)\s*,")
# ICU's quoting: an apostrophe before a brace, `#`, `|` or another apostrophe starts literal text.
_QUOTING = re.compile(r"'[{}#|']")
# What may stand right before and after the argument (the empty string: the text's edge).
_OPEN_EDGE = frozenset(["", " ", "\t", "(", "[", "\"", "'", "„", "“", "«", "»", ":", "—", "–"])
_CLOSE_EDGE = frozenset(["", " ", "\t", ".", ",", ";", ":", "!", "?", ")", "]", "\"", "'", "“", "”", "»", "«", "…", "—", "–"])


@dataclass(frozen=True)
class Branches:
    """An argument's branches: whether it is a plural one (its `#` is the number), and each branch's
    message, its whitespace stripped, as (start, end) offsets into the text."""

    plural: bool
    messages: tuple[tuple[int, int], ...]


def branches(text: str, argument: Protected) -> Branches | None:
    """The branches of the ICU argument text[argument.start:argument.end]; None where it is no
    plural, selectordinal or select argument or does not read as one."""
    header = _HEADER.match(text, argument.start, argument.end)
    if header is None:
        return None
    closing = argument.end - 1
    messages = []
    at = header.end()
    while True:
        while at < closing and text[at].isspace():
            at += 1
        if at == closing:
            break
        key = _KEY.match(text, at, closing)
        if key is None:
            return None
        opening, depth, end = key.end() - 1, 0, None
        for k in range(opening, closing):
            depth += {"{": 1, "}": -1}.get(text[k], 0)
            if depth == 0:
                end = k
                break
        if end is None:
            return None
        start, stop = opening + 1, end
        while start < stop and text[start].isspace():
            start += 1
        while stop > start and text[stop - 1].isspace():
            stop -= 1
        messages.append((start, stop))
        at = end + 1
    if not messages:
        return None
    return Branches(header.group(1) != "select", tuple(messages))


def icu_split(text: str, protected: Sequence[Protected], terms: Sequence[str],
              styles: Sequence[str]) -> tuple[Layout, list[list[Protected]], tuple[str, ...]] | None:
    """The layout of a plain text with one plural or select argument (`protected`: the text's parts,
    `find_protected`): a segment per branch, the branch's message with the text around the argument,
    and the argument's own syntax kept; with each segment's protected parts (read with `terms` and
    `styles`, and `#` in a plural's) and the styles they were read with. None where the text is not
    such a text."""
    if "\n" in text or _QUOTING.search(text):
        return None
    arguments = [p for p in protected if p.kind == "icu" and _HEADER.match(text, p.start, p.end)]
    if len(arguments) != 1:
        return None
    argument = arguments[0]
    # Written against a word or placeholder ("files{n, …}"), the sentence would join the two, and a
    # placeholder read across the join would stand for two places of the text sent.
    if (text[argument.start - 1:argument.start] not in _OPEN_EDGE
            or text[argument.end:argument.end + 1] not in _CLOSE_EDGE):
        return None
    parsed = branches(text, argument)
    if parsed is None or any(_NESTED.search(text, start, stop) for start, stop in parsed.messages):
        return None
    own = tuple(styles) + ((ICU_NUMBER,) if parsed.plural else ())
    prefix, suffix = text[:argument.start], text[argument.end:]
    parts: list[Kept | Block] = []
    segments: list[Segment] = []
    found: list[list[Protected]] = []
    cursor = argument.start
    for index, (start, stop) in enumerate(parsed.messages):
        sentence = prefix + text[start:stop] + suffix
        if not has_visible_text(sentence):
            return None
        origin = (*range(argument.start), *range(start, stop), *range(argument.end, len(text)),
                  len(text) if suffix else stop)
        parts += [Kept(text[cursor:start], cursor), Block((index,), ())]
        segments.append(Segment(sentence, origin))
        found.append(find_protected(sentence, terms, own))
        cursor = stop
    parts.append(Kept(text[cursor:argument.end], cursor))
    return Layout(text, tuple(parts), tuple(segments)), found, own
