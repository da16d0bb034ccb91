"""Language codes as the service matches them: trimmed, lower-cased, then 1 to 16 characters of
letters, digits, "-" or "_" ("en", "pt-br", "zh_hans"). A request's codes and a model's manifest
codes go through the same rule, so every pair a model reports is one a request can name."""
from __future__ import annotations

import re

LANGUAGE_CODE = re.compile(r"^[a-z0-9_-]{1,16}$")


def normalise_language_code(value: object) -> str:
    """The code in its matching form; ValueError naming what is wrong."""
    if not isinstance(value, str):
        raise ValueError(f"must be a string, got {type(value).__name__}")
    code = value.strip().lower()
    if not LANGUAGE_CODE.match(code):
        raise ValueError(f"{value!r} is not a language code (1 to 16 letters, digits, '-' or '_')")
    return code
