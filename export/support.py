"""Check support: every reason a model cannot be exported to a target, listed at once.

Generic over the attention registry: every kind answers
`export_problems(target, options, site) -> list[str]` (model/attention/contract.py; empty by
default) to refuse targets it knows it cannot reach; the graph targets (onnx, torchscript)
also probe the decoding state itself (`export.layout`). CTranslate2 has only the vanilla
Transformer, so every other kind is refused by name, and so is every ModelConfig field that its
TransformerSpec cannot represent (phrase representations, alignment biases, and any field added
later) unless it is at its default: the list below names what CTranslate2 does represent.
"""
from __future__ import annotations

import dataclasses

from model.attention.registry import SITES, attention_class
from model.config import ModelConfig
from model.transformer import Transformer
from export.layout import StateLayout, probe_layout

TARGETS = ("onnx", "torchscript", "ct2")
GRAPH_TARGETS = ("onnx", "torchscript")
# ModelConfig fields that CTranslate2's TransformerSpec represents, or that inference never reads
# (dropouts; the global fertility head only adds a training loss). Any other field away from its
# default is a part of the model that CTranslate2 would silently drop, so it is refused.
CT2_FIELDS = frozenset({
    "vocab_size", "d_model", "n_heads", "d_ff", "encoder_layers", "decoder_layers", "max_positions",
    "pad_id", "bos_id", "eos_id", "tie_embeddings", "alignment_layer",
    "dropout", "attention_dropout", "activation_dropout", "global_fertility", "schema_version",
})


def registry_problems(config: ModelConfig, target: str) -> list[str]:
    """What the attention kinds themselves say about `target`."""
    problems: list[str] = []
    for site in SITES:
        spec = config.attention(site)
        found = attention_class(spec.kind).export_problems(target, dict(spec.options), site)
        problems += [f"{site}_attention ({spec.kind}): {p}" for p in found]
    return problems


def ct2_problems(config: ModelConfig) -> list[str]:
    """CTranslate2's TransformerSpec is the pre-norm vanilla Transformer; nothing else maps onto it."""
    problems = []
    for site in SITES:
        spec = config.attention(site)
        if spec.kind != "vanilla":
            problems.append(
                f"{site}_attention is {spec.kind!r}: CTranslate2's TransformerSpec has only vanilla "
                "multi-head attention (export this model to onnx or torchscript instead)"
            )
    sites = {f"{site}_attention" for site in SITES}
    for field in dataclasses.fields(ModelConfig):
        if field.name in CT2_FIELDS or field.name in sites:
            continue
        default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
        value = getattr(config, field.name)
        if value != default:
            problems.append(
                f"{field.name} is set ({ModelConfig.to_dict(config)[field.name]!r}): CTranslate2's TransformerSpec "
                "has no such part (export this model to onnx or torchscript instead)"
            )
    return problems


def check_support(model: Transformer, target: str) -> tuple[StateLayout | None, list[str]]:
    """(state layout for graph targets, every reason `model` cannot be exported to `target`)."""
    if target not in TARGETS:
        raise ValueError(f"unknown export target {target!r}; known targets: {', '.join(TARGETS)}")
    problems = registry_problems(model.config, target)
    head = (model.config.supervised_alignment or {}).get("head")
    if head == "added":
        problems.append("supervised_alignment has an added head: the exported step graphs have no output for it; "
                        "serve this model with the torch backend (an export of the same model without the head "
                        "translates identically)")
    if target == "ct2":
        return None, problems + ct2_problems(model.config)
    layout, layout_problems = probe_layout(model)
    return layout, problems + layout_problems
