"""Options of the structural alignment biases (Cohn et al.): checked as a whole, every problem at once.

`alignment_biases` maps bias names to their options, e.g.
{"position": {}, "markov": {"window": 1}, "fertility": {"window": 1}}; {} turns them off.
The biases go on the cross-attention of every decoder layer, which must expose token-level
logits (a `token_level` kind, model/attention/contract.py).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from model.attention.registry import attention_class
from model.biases.registry import bias_class, known_biases


def validate_alignment_biases(options: Any, config: Any) -> list[str]:
    if not isinstance(options, Mapping):
        return [f"alignment_biases must be an object, got {type(options).__name__}"]
    if not options:
        return []
    problems: list[str] = []
    known = known_biases()
    for name, bias_options in options.items():
        if name not in known:
            problems.append(f"alignment_biases: unknown bias {name!r}; known biases: {', '.join(known)}")
        elif not isinstance(bias_options, Mapping):
            problems.append(f"alignment_biases.{name} must be an object of options, got {type(bias_options).__name__}")
        else:
            problems += bias_class(name).validate_options(dict(bias_options))
    kind = config.cross_attention.kind
    cls = attention_class(kind)
    if not cls.token_level:
        problems.append(f"alignment biases need token-level cross-attention logits; cross_attention kind {kind!r} {_why_not(cls)}")
    return problems


def _why_not(cls: type) -> str:
    # The phrasal kinds score source n-grams, not tokens: a token-position bias has no logit to go on.
    from model.attention.ngram_attention import NgramAttention

    if issubclass(cls, NgramAttention):
        return "scores n-grams"
    return "does not expose them (it is not token_level: no token_logits and mix)"
