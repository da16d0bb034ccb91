"""Options of the attentive source-phrase representations (Xu et al.): checked as a whole."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def validate_phrase_representation(options: Any, config: Any) -> list[str]:
    if not isinstance(options, Mapping):
        return [f"phrase_representation must be an object or null, got {type(options).__name__}"]
    return [f"phrase_representation is not implemented yet (options {sorted(options)})"]
