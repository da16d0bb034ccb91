"""Replacing character ranges of a decoded translation, with its piece spans moved to the new text
(model/text/compatibility.py and model/text/unknown.py write source characters back this way)."""
from __future__ import annotations

from collections.abc import Sequence

Span = tuple[int, int]
Edit = tuple[int, int, str]   # text[start:end] becomes the string; edits sorted, not overlapping


def apply(text: str, edits: Sequence[Edit]) -> str:
    pieces, last = [], 0
    for start, end, written in edits:
        pieces += [text[last:start], written]
        last = end
    return "".join(pieces) + text[last:]


def moved(edits: Sequence[Edit], spans: Sequence[Span]) -> list[Span]:
    """`spans` in the edited text: a span inside a replaced range covers what replaced it; an empty
    span stays empty."""
    out = []
    for begin, end in spans:
        new_begin = _position(edits, begin, False)
        out.append((new_begin, new_begin) if begin == end else (new_begin, _position(edits, end, True)))
    return out


def _position(edits: Sequence[Edit], index: int, is_end: bool) -> int:
    """Where `index` of the old text lands in the edited one; inside a replaced range, at the start
    of what replaced it (a span's begin) or after it (a span's end)."""
    delta = 0
    for start, end, written in edits:
        if index <= start:
            break
        if index < end:
            return start + delta + (len(written) if is_end else 0)
        delta += len(written) - (end - start)
    return index + delta
