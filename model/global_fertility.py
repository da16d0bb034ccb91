"""The global fertility loss (Cohn et al.): options."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def validate_global_fertility(options: Any, config: Any) -> list[str]:
    if not isinstance(options, Mapping):
        return [f"global_fertility must be an object or null, got {type(options).__name__}"]
    return ["global_fertility is not implemented yet"]
