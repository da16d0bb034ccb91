"""One hypothesis as the client gets it (service/protected_translation.py makes it, the web
layer renders it)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from service.alignment_flags import AlignmentFlags
from service.glossary import TermReport
from service.protection.placement import Placed, Removed
from service.runtime.base import Translation, Word


@dataclass(frozen=True)
class MemoryUse:
    """A part of the text answered by a translation memory (service/memory.py), not the model: the
    memory's name, the segment's span in the text sent and its translation's span in the output."""

    memory: str
    source_start: int
    source_end: int
    target_start: int
    target_end: int


@dataclass(frozen=True)
class Served:
    """Text and alignment offsets in the client's strings, where each protected part went (empty
    when nothing was protected), and the alignment's flags (when an alignment was asked for)."""

    translation: Translation
    placed: list[Placed]
    flags: AlignmentFlags | None = None
    removed: list[Removed] = field(default_factory=list)      # placeholder-like text the model made up
    glossary: list[TermReport] = field(default_factory=list)  # the request glossary's terms found in the text
    memory: list[MemoryUse] = field(default_factory=list)     # the parts a translation memory answered


def spliced(text: str, edits: list[tuple[int, int, str]]) -> str:
    """`text` with text[start:end] replaced by each edit's text (edits apart, in order)."""
    parts, cursor = [], 0
    for start, end, value in edits:
        parts += [text[cursor:start], value]
        cursor = end
    return "".join(parts) + text[cursor:]


def mover(edits: list[tuple[int, int, str]]) -> Callable[[int], int]:
    """Where an offset of a text stands once `edits` (apart, in order) are `spliced` into it; one
    inside an edited span goes where its text stands."""
    def moved(offset: int) -> int:
        shift = 0
        for start, end, value in edits:
            if offset >= end:
                shift += len(value) - (end - start)
            elif offset > start:
                return start + shift + min(offset - start, len(value))
        return offset + shift
    return moved


def edited(served: Served, edits: list[tuple[int, int, str]]) -> Served:
    """`served` with output[start:end] replaced by each edit's text (edits apart, in any order), every
    target offset after an edit moved along; one inside an edited span goes where its text stands."""
    edits = sorted(edits)
    if not edits:
        return served
    text = spliced(served.translation.text, edits)
    moved = mover(edits)
    alignment = served.translation.alignment
    if alignment is not None:
        alignment = replace(alignment, target_words=[Word(text[moved(w.start):moved(w.end)], moved(w.start), moved(w.end))
                                                     for w in alignment.target_words])
    return replace(
        served, translation=replace(served.translation, text=text, alignment=alignment),
        placed=[replace(p, target_start=moved(p.target_start), target_end=moved(p.target_end)) for p in served.placed],
        removed=[replace(r, at=moved(r.at)) for r in served.removed],
        glossary=[replace(g, target_spans=[(moved(a), moved(b)) for a, b in g.target_spans]) for g in served.glossary],
        memory=[replace(m, target_start=moved(m.target_start), target_end=moved(m.target_end)) for m in served.memory])
