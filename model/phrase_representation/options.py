"""Options of the attentive source-phrase representations (Xu et al. 2020): checked as a whole.

    "phrase_representation": {"pooling": "attentive", "glance": "max", "activation": "sigmoid",
                              "decoder_combination": "attentive", "transparent": true}
    {} = these defaults (the paper's best system); null = off

- pooling: how a chunk becomes one vector. "attentive" (default): the attentive phrase
  representation of eq. 1-4; "mean" / "max": the plain mean / max of the chunk's tokens, no
  attention (the pooling rows of the paper's ablation table).
- glance: the glance vector of attentive pooling (eq. 1), "max" (default, the paper's best
  setting) or "mean". Only with pooling "attentive".
- activation: σ of the attentive combination W₄σ(W₃[x | c] + b₃) + b₄ (eq. 7-8). "sigmoid"
  (default: σ as the paper defines it, eq. 3) or "relu" (the Transformer feed-forward's choice).
- decoder_combination: how a decoder layer merges its phrase context c into the token stream.
  "attentive" (default, the paper: the same combination as the encoder's, eq. 7-8, in every
  decoder layer) or "residual" (a Transformer adaptation: c is added to the residual stream like
  any other sublayer's output).
- transparent: true (default): each decoder layer reads a learned softmax mix of the phrase
  representations of the embeddings and of every encoder layer (transparent attention, §3.2);
  false: every decoder layer reads the last encoder layer's phrases (the ablation).

Combinations: the phrase sublayers are separate from the configured attention sites (their own
vanilla attentions over chunk starts), so every attention kind combines at every site. With a
phrasal (convkv / queryk) token cross-attention, the phrase table a model reports is that
attention's n-gram table, not the chunk table (see `DecoderLayer.forward`). No combination of
the other ModelConfig fields is impossible, so nothing else is refused here.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from model.phrase_representation.functional import ACTIVATIONS, GLANCES, POOLINGS

PREFIX = "phrase_representation"
KNOWN = ("activation", "decoder_combination", "glance", "pooling", "transparent")
COMBINATIONS = ("attentive", "residual")
DEFAULTS: dict[str, Any] = {
    "pooling": "attentive", "glance": "max", "activation": "sigmoid", "decoder_combination": "attentive",
    "transparent": True,
}
_CHOICES = {"pooling": POOLINGS, "glance": GLANCES, "activation": ACTIVATIONS, "decoder_combination": COMBINATIONS}


def validate_phrase_representation(options: Any, config: Any) -> list[str]:
    """Every problem of the options at once (the core config is already known to be sound)."""
    if not isinstance(options, Mapping):
        return [f"{PREFIX} must be an object or null, got {type(options).__name__}"]
    problems: list[str] = []
    unknown = sorted(set(options) - set(KNOWN))
    if unknown:
        problems.append(f"{PREFIX}: unknown option(s) {unknown}; known options: {', '.join(KNOWN)}")
    for name, choices in _CHOICES.items():
        value = options.get(name, DEFAULTS[name])
        if not isinstance(value, str) or value not in choices:
            problems.append(f"{PREFIX}: {name} must be one of {', '.join(choices)}, got {value!r}")
    transparent = options.get("transparent", DEFAULTS["transparent"])
    if not isinstance(transparent, bool):
        problems.append(f"{PREFIX}: transparent must be true or false, got {transparent!r}")
    pooling = options.get("pooling", DEFAULTS["pooling"])
    if "glance" in options and pooling in POOLINGS and pooling != "attentive":
        problems.append(f"{PREFIX}: glance applies only to pooling 'attentive', not {pooling!r}")
    return problems


def phrase_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options of a validated config with the defaults filled in."""
    return {**DEFAULTS, **dict(options)}
