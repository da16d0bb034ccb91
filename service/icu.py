"""ICU MessageFormat's plural and select arguments, translated branch by branch.

"{count, plural, one {# file selected} other {# files selected}}" was one placeholder, kept as
written: its English branches came back untranslated. Now a plain text with a `plural`,
`selectordinal` or `select` argument is translated as one whole sentence per branch, the text
around the argument put into each: "You have {n, plural, one {one message} other {# messages}}."
comes back "{n, plural, one {Sie haben eine Nachricht.} other {Sie haben # Nachrichten.}}", what
ICU's guidance asks of messages (whole sentences in each branch, so that a translation may order
its words its own way) and the same message to a program. Arguments inside a branch or beside one
another nest in the translation, a sentence per combination of branches ("{g, select, female {She
has {n, plural, one {# file} other {# files}}} other {…}}"), up to MAX_SENTENCES. A plural branch's
`#`, the number, is a placeholder in its sentences (style ICU_NUMBER). Left one placeholder each, as
before: ICU's apostrophe quoting (`'{'`; its doubled apostrophe, "Don''t", reaches the model as one and
comes back doubled), a line break, an argument written against a word, more
sentences than MAX_SENTENCES, or a `#` the nesting would give another plural's number and that cannot
be written by its plural's name instead (`_renamed`: one of a plural with an offset, or of none).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from service.layout import Block, Kept, Layout, Segment, unescaped
from service.protection.placeholders import ICU_NUMBER, Protected, find_protected
from service.runtime.base import has_visible_text

_HEADER = re.compile(r"\{\s*([A-Za-z0-9_]+)\s*,\s*(plural|selectordinal|select)\s*,\s*(offset\s*:\s*\d+\s*)?")
_KEY = re.compile(r"\s*(?:=\d+|[A-Za-z0-9_-]+)\s*\{")
# ICU's quoting: an apostrophe before a brace, `#` or `|` starts literal text. Two apostrophes are
# one, written: "Don''t" reaches the model as "Don't" and comes back written so (layout.unescaped).
_QUOTING = re.compile(r"(?<!')'[{}#|]|'{3}")
_APOSTROPHE = (("''", "'"),)
# What may stand right before and after the argument (the empty string: the text's edge; a tag's
# bracket, "<b>{n, plural, …}</b>").
_OPEN_EDGE = frozenset(["", " ", "\t", "(", "[", "\"", "'", "„", "“", "«", "»", ":", "—", "–", ">"])
_CLOSE_EDGE = frozenset(["", " ", "\t", ".", ",", ";", ":", "!", "?", ")", "]", "\"", "'", "“", "”", "»", "«", "…",
                         "—", "–", "<"])


# More sentences than this (arguments inside or beside one another multiply their branches) leave
# the text's arguments one placeholder each.
MAX_SENTENCES = 32


@dataclass(frozen=True)
class Branches:
    """The branches of the argument that starts at `start`: whether it is a plural one (its `#` is the
    number), and each branch's message, its whitespace stripped, as (start, end) offsets into the text."""

    start: int
    plural: bool
    messages: tuple[tuple[int, int], ...]
    name: str = ""        # the argument's name: its number is "{name}" where `#` would read another's
    offset: bool = False  # whether it has an offset (then `#` is not "{name}")


def _closing(text: str, opening: int, end: int) -> int | None:
    """The offset of the brace that closes the one at `opening`, before `end`; None if none does."""
    depth = 0
    for k in range(opening, end):
        depth += {"{": 1, "}": -1}.get(text[k], 0)
        if depth == 0:
            return k
    return None


def branches(text: str, start: int, end: int) -> Branches | None:
    """The branches of the ICU argument text[start:end]; None where it is no plural, selectordinal or
    select argument or does not read as one."""
    header = _HEADER.match(text, start, end)
    if header is None:
        return None
    closing = end - 1
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
        opening = key.end() - 1
        stop = _closing(text, opening, closing)
        if stop is None:
            return None
        first, last = opening + 1, stop
        while first < last and text[first].isspace():
            first += 1
        while last > first and text[last - 1].isspace():
            last -= 1
        messages.append((first, last))
        at = stop + 1
    if not messages:
        return None
    return Branches(start, header.group(2) != "select", tuple(messages), header.group(1), header.group(3) is not None)


def _arguments(text: str, start: int, end: int) -> list[tuple[int, int]] | None:
    """The plural and select arguments in text[start:end] itself (not inside another), as (start,
    end); None where its braces do not pair."""
    found = []
    k = start
    while k < end:
        if text[k] == "}":
            return None
        if text[k] != "{":
            k += 1
            continue
        closing = _closing(text, k, end)
        if closing is None:
            return None
        if _HEADER.match(text, k, closing + 1):
            found.append((k, closing + 1))
        k = closing + 1
    return found


@dataclass
class _Expansion:
    parts: list[Kept | Block] = field(default_factory=list)
    sentences: list[tuple[tuple[int, int], ...]] = field(default_factory=list)  # each one's ranges of the text
    plurals: list[Branches | None] = field(default_factory=list)  # each one's innermost plural in the output
    read: list[Branches] = field(default_factory=list)  # every argument read


def _edge(text: str, ranges: list[tuple[int, int]], last: bool) -> str:
    """The last (or first) character of the ranges' text, "" for none."""
    pieces = [text[a:b] for a, b in ranges if b > a]
    if not pieces:
        return ""
    return pieces[-1][-1] if last else pieces[0][0]


def _expand(text: str, ranges: list[tuple[int, int]], plural: Branches | None, out: _Expansion) -> bool:
    """Appends to `out` the translation's layout of the message made of `ranges` of the text: where
    it holds an argument, the argument's syntax kept and, per branch, the message with the branch in
    the argument's place, expanded in turn; else the message as one sentence (`plural`: the innermost
    plural argument the output puts it in). False where it cannot be (an argument against a word,
    one that does not read, too many sentences)."""
    for index, (start, end) in enumerate(ranges):
        arguments = _arguments(text, start, end)
        if arguments is None:
            return False
        if not arguments:
            continue
        first, last = arguments[0]
        # Written against a word or placeholder ("files{n, …}"), a sentence would join the two, and a
        # placeholder read across the join would stand for two places of the text sent.
        before = text[first - 1] if first > start else _edge(text, ranges[:index], last=True)
        after = text[last] if last < end else _edge(text, ranges[index + 1:], last=False)
        parsed = branches(text, first, last)
        if before not in _OPEN_EDGE or after not in _CLOSE_EDGE or parsed is None:
            return False
        if all(read.start != first for read in out.read):
            out.read.append(parsed)
        cursor = first
        for message in parsed.messages:
            out.parts.append(Kept(text[cursor:message[0]], cursor))
            if not _expand(text, ranges[:index] + [(start, first), message, (last, end)] + ranges[index + 1:],
                           parsed if parsed.plural else plural, out):
                return False
            cursor = message[1]
        out.parts.append(Kept(text[cursor:last], cursor))
        return True
    if len(out.sentences) == MAX_SENTENCES:
        return False
    out.parts.append(Block((len(out.sentences),), ()))
    out.sentences.append(tuple((a, b) for a, b in ranges if b > a))
    out.plurals.append(plural)
    return True


def _renamed(text: str, ranges: tuple[tuple[int, int], ...], plural: Branches | None,
             read: list[Branches]) -> dict[int, str] | None:
    """The `#`s of the sentence of `ranges` that the output puts inside another plural than their own
    (`plural`, the innermost the output puts the sentence in), each with what the translation writes
    for it: "{name}", its own plural's number by name, as ICU's guidance writes nested plurals.
    "Deleted {n, plural, … {# files}} from {m, plural, … {# folders}}" nests m in n's branches, where
    n's `#` would read m's number: it comes back "{n}". None where a `#` cannot be so written: its
    plural has an offset (`#` is the number less it), or it is a `#` of no plural put in one."""
    renamed = {}
    for a, b in ranges:
        for k in range(a, b):
            if text[k] != "#":
                continue
            holding = [r for r in read if r.plural and any(m[0] <= k < m[1] for m in r.messages)]
            own = max(holding, key=lambda r: r.start, default=None)  # the innermost holding it
            if own == plural:
                continue
            if own is None or own.offset:
                return None
            renamed[k] = "{" + own.name + "}"
    return renamed


def icu_split(text: str, protected: Sequence[Protected], terms: Sequence[str],
              styles: Sequence[str]) -> tuple[Layout, list[list[Protected]], list[tuple[str, ...]]] | None:
    """The layout of a plain text with plural or select arguments (`protected`: the text's parts,
    `find_protected`, of which one is such an argument): a segment per combination of branches, the
    message with those branches in their arguments' places, and the arguments' own syntax kept; with
    each segment's protected parts (read with `terms` and `styles`, and `#` in a plural's) and the
    styles they were read with. None where the text is not such a text or cannot be cut so."""
    if "\n" in text or _QUOTING.search(text):
        return None
    if not any(p.kind == "icu" and _HEADER.match(text, p.start, p.end) for p in protected):
        return None
    out = _Expansion()
    if not _expand(text, [(0, len(text))], None, out):
        return None
    segments, own = [], []
    renamed: dict[int, str] = {}
    for ranges, plural in zip(out.sentences, out.plurals):
        sentence = "".join(text[a:b] for a, b in ranges)
        numbers = _renamed(text, ranges, plural, out.read)
        if not has_visible_text(sentence) or numbers is None:
            return None
        renamed.update(numbers)
        origin = tuple(k for a, b in ranges for k in range(a, b)) + (ranges[-1][1],)
        segments.append(Segment(sentence, origin))
        own.append(tuple(styles) + ((ICU_NUMBER,) if plural is not None else ()))
    layout = Layout(text, tuple(part for part in out.parts if not isinstance(part, Kept) or part.text),
                    tuple(segments), tuple(sorted(renamed.items())))
    if "''" in text:
        layout = unescaped(layout, _APOSTROPHE)
    found = [find_protected(segment.text, terms, read) for segment, read in zip(layout.segments, own)]
    return layout, found, own
