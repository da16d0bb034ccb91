"""Options of the structural alignment biases (Cohn et al.): checked as a whole."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def validate_alignment_biases(options: Any, config: Any) -> list[str]:
    if not isinstance(options, Mapping):
        return [f"alignment_biases must be an object, got {type(options).__name__}"]
    return [f"alignment_biases: unknown bias {name!r}" for name in sorted(options)]
