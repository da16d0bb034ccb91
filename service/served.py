"""One hypothesis as the client gets it (service/protected_translation.py makes it, the web
layer renders it)."""
from __future__ import annotations

from dataclasses import dataclass

from service.alignment_flags import AlignmentFlags
from service.protection.placement import Placed
from service.runtime.base import Translation


@dataclass(frozen=True)
class Served:
    """Text and alignment offsets in the client's strings, where each protected part went (empty
    when nothing was protected), and the alignment's flags (when an alignment was asked for)."""

    translation: Translation
    placed: list[Placed]
    flags: AlignmentFlags | None = None
