"""Options of the attentive source-phrase representations (Xu et al.): checked as a whole.

    "phrase_representation": {"glance": "mean"}     # or "max"; {} = the defaults; null = off

- glance: how a chunk's glance vector is pooled from its real tokens (eq. 1), "mean" (default)
  or "max".

Combinations: the phrase sublayers are separate from the configured attention sites (their own
vanilla attentions over chunk starts), so every attention kind combines at every site. With a
phrasal (convkv / queryk) token cross-attention, the phrase table a model reports is that
attention's n-gram table, not the chunk table (see `DecoderLayer.forward`). No combination of
the other ModelConfig fields is impossible, so nothing else is refused here.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from model.phrase_representation.functional import GLANCES

PREFIX = "phrase_representation"
KNOWN = ("glance",)
DEFAULTS: dict[str, Any] = {"glance": "mean"}


def validate_phrase_representation(options: Any, config: Any) -> list[str]:
    """Every problem of the options at once (the core config is already known to be sound)."""
    if not isinstance(options, Mapping):
        return [f"{PREFIX} must be an object or null, got {type(options).__name__}"]
    problems: list[str] = []
    unknown = sorted(set(options) - set(KNOWN))
    if unknown:
        problems.append(f"{PREFIX}: unknown option(s) {unknown}; known options: {', '.join(KNOWN)}")
    glance = options.get("glance", DEFAULTS["glance"])
    if not isinstance(glance, str) or glance not in GLANCES:
        problems.append(f"{PREFIX}: glance must be one of {', '.join(GLANCES)}, got {glance!r}")
    return problems


def phrase_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options of a validated config with the defaults filled in."""
    return {**DEFAULTS, **dict(options)}
