"""One hypothesis as the client gets it (service/protected_translation.py makes it, the web
layer renders it)."""
from __future__ import annotations

from dataclasses import dataclass, field

from service.alignment_flags import AlignmentFlags
from service.glossary import TermReport
from service.protection.placement import Placed, Removed
from service.runtime.base import Translation


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
