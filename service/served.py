"""One hypothesis as the client gets it (service/protected_translation.py makes it,
service/schemas.py renders it)."""
from __future__ import annotations

from dataclasses import dataclass

from service.protection.placement import Placed
from service.runtime.base import Translation


@dataclass(frozen=True)
class Served:
    """Text and alignment offsets in the client's strings, and where each protected part went
    (empty when nothing was protected)."""

    translation: Translation
    placed: list[Placed]
