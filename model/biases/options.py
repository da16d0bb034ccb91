"""Options of the structural alignment biases (Cohn et al.): checked as a whole, every problem at once.

`alignment_biases` maps bias names to their options, e.g.
{"position": {}, "markov": {"window": 1, "form": "recurrent"}, "fertility": {"window": 1, "form": "recurrent"}};
{} turns them off. The terms that read earlier attention (markov, fertility) share one "form"
(`model.biases.window_bias`): the layer either runs its softmax step by step over the target or not.
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
    problems += _form_problems(options)
    kind = config.cross_attention.kind
    cls = attention_class(kind)
    if not cls.token_level:
        problems.append(f"alignment biases need token-level cross-attention logits; cross_attention kind {kind!r} {_why_not(cls)}")
    return problems


def bias_form(options: Mapping[str, Mapping[str, Any]]) -> str:
    """The form of a valid `alignment_biases`: that of its attention-reading terms, "parallel" when none
    reads earlier attention (the position term alone is the same in both)."""
    from model.biases.window_bias import DEFAULT_FORM

    forms = {dict(o).get("form", DEFAULT_FORM) for name, o in options.items() if name in HISTORY_BIASES}
    # Without a term that reads earlier attention there is no recurrence to run step by step.
    return forms.pop() if forms else "parallel"


# The terms that read the attention of earlier target steps, and so have a form.
HISTORY_BIASES = ("fertility", "markov")


def _form_problems(options: Mapping[str, Any]) -> list[str]:
    from model.biases.window_bias import DEFAULT_FORM, FORMS

    forms = {name: o.get("form", DEFAULT_FORM) for name, o in sorted(options.items())
             if name in HISTORY_BIASES and isinstance(o, Mapping)}
    if len(set(forms.values())) > 1 and set(forms.values()) <= set(FORMS):
        given = ", ".join(f"{name} {form!r}" for name, form in forms.items())
        return [f"alignment_biases: {' and '.join(forms)} must have the same form (the layer runs step by step "
                f"or not), got {given}"]
    return []


def _why_not(cls: type) -> str:
    # The phrasal kinds score source n-grams, not tokens: a token-position bias has no logit to go on.
    from model.attention.ngram_attention import NgramAttention

    if issubclass(cls, NgramAttention):
        return "scores n-grams"
    return "does not expose them (it is not token_level: no token_logits and mix)"
