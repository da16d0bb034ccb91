"""The supervised alignment head (Garg et al. 2019, "Jointly Learning to Align and Translate with
Transformer Models", §4.2): one cross-attention head of one decoder layer, trained with a
cross-entropy against external word alignments beside the translation loss.

Options (`ModelConfig.supervised_alignment`, None = off):
    layer   required: the decoder layer (negative counts from the end). Garg et al. take the
            penultimate layer of six; the recipes here take layer 2 of 4, the penultimate one.
    head    required: an integer h, head h of that layer's cross-attention (Garg et al.: the head
            shares its attention with translation, so the whole model is trained with both losses);
            or "added": one extra dot-product head whose queries are layer `layer`'s output and
            whose keys are the encoder output. Its context feeds nothing, so translation is exactly
            that of the model without it, and it can be trained on a frozen model (the recipe's
            `trainable`) — what a 2-core CPU can afford for a trained model (RESULTS.md).
    weight  required, a number >= 0: λ, the weight of the alignment loss beside the translation loss
            (`training.losses.supervised_alignment_loss`).

Which row is supervised: the row of the decoder step that READS target token k (its input is y_k,
so it predicts y_{k+1}), not the step that predicts it as in Garg et al. In a causal decoder the
predicting step has not seen the word it must align — which is why shift-att (Chen et al. 2020)
aligns better than the plain attention — while the reading step has. Decoding loses nothing: the
step that reads the last word is the one that predicts EOS, so every word's row exists once the
hypothesis is finished (`model.decoding.generate` returns T + 1 rows for T tokens).

An added head is the same dot-product head over the encoder's tokens whatever the attention kinds.
Every attention kind reports a token distribution per head (B, H, T, S), and for an existing head
that is what is supervised. N-gram (convkv / queryk) cross-attention spreads an n-gram's weight evenly over its
tokens: with the heterogeneous and interleaved structures every head attends to every size under
one softmax, so any head can put all its mass on one token (through the unigram); with the
homogeneous structure a head attends to one n-gram size only, and a bigram or trigram head can never
put more than 1/n of its weight on one word — so only a unigram head may be supervised there (the
config says which heads those are when it refuses another).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

ADDED = "added"

KNOWN = ("head", "layer", "weight")
PREFIX = "supervised_alignment"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_supervised_alignment(options: Any, config: Any) -> list[str]:
    """Every problem of the options at once (the core config is already known to be sound)."""
    if not isinstance(options, Mapping):
        return [f"{PREFIX} must be an object like {{\"layer\": 2, \"head\": 0, \"weight\": 0.5}} or null, "
                f"got {type(options).__name__}"]
    problems: list[str] = []
    unknown = sorted(set(options) - set(KNOWN))
    if unknown:
        problems.append(f"{PREFIX}: unknown option(s) {unknown}; known options: {', '.join(KNOWN)}")
    for name in KNOWN:
        if name not in options:
            problems.append(f"{PREFIX}: option {name!r} is required")
    layers = config.decoder_layers
    layer = options.get("layer", 0)
    if not _is_int(layer) or not -layers <= layer < layers:
        problems.append(f"{PREFIX}: layer must index a decoder layer in [-{layers}, {layers}), got {layer!r}")
    head = options.get("head", 0)
    if head == ADDED:
        pass
    elif not _is_int(head) or not 0 <= head < config.n_heads:
        problems.append(f"{PREFIX}: head must be a head index in [0, {config.n_heads}) or {ADDED!r}, got {head!r}")
    elif config.cross_attention.kind in ("convkv", "queryk"):
        problems += _ngram_head_problems(config, head)
    weight = options.get("weight", 0.0)
    if not isinstance(weight, (int, float)) or isinstance(weight, bool) or not math.isfinite(weight) or weight < 0:
        problems.append(f"{PREFIX}: weight must be a number >= 0, got {weight!r}")
    return problems


def _ngram_head_problems(config: Any, head: int) -> list[str]:
    from model.attention.ngram_options import phrasal_spec

    spec = phrasal_spec(dict(config.cross_attention.options), config.n_heads)
    if len(spec.groups) == 1:
        return []  # heterogeneous / interleaved: every head attends to every size
    sizes = [group.ngrams for group in spec.groups for _ in range(group.heads)]
    if sizes[head] == (1,):
        return []
    unigram = [h for h, s in enumerate(sizes) if s == (1,)]
    where = f"heads {unigram} are" if unigram else "no head is"
    return [f"{PREFIX}: head {head} of the homogeneous cross-attention attends to {sizes[head][0]}-grams and can "
            f"put at most 1/{sizes[head][0]} of its weight on one word; supervise a unigram head ({where} unigram)"]


class SupervisedAlignment(nn.Module):
    """The validated options of a config, and for an added head its parameters (a query LayerNorm,
    query and key projections of one head's width)."""

    def __init__(self, config: Any):
        super().__init__()
        options = dict(config.supervised_alignment)
        self.layer_index: int = options["layer"] % config.decoder_layers
        self.added = options["head"] == ADDED
        self.head: int | None = None if self.added else options["head"]
        self.weight = float(options["weight"])
        if self.added:
            width = config.d_model // config.n_heads
            self.query_norm = nn.LayerNorm(config.d_model)
            self.q_proj = nn.Linear(config.d_model, width)
            self.k_proj = nn.Linear(config.d_model, width)

    def select(self, probs: torch.Tensor) -> torch.Tensor:
        """An existing head: the layer's cross-attention (B, H, T, S) -> that head's (B, T, S)."""
        return probs[:, self.head]  # (B, T, S)

    def keys(self, memory: torch.Tensor) -> torch.Tensor:
        """An added head: encoder output (B, S, D) -> its keys (B, S, dₕ), once per source."""
        return self.k_proj(memory)

    def attend(self, x: torch.Tensor, keys: torch.Tensor, pad_mask: torch.Tensor) -> torch.Tensor:
        """An added head: layer output x (B, T, D), keys (B, S, dₕ), pad_mask (B, S) -> softmax(qkᵀ/√dₕ) (B, T, S)
        in float32 (Vaswani et al., eq. 1, one head; nothing reads a context)."""
        q = self.q_proj(self.query_norm(x))  # (B, T, dₕ)
        scores = torch.matmul(q.float(), keys.float().transpose(1, 2)) / math.sqrt(q.shape[-1])  # (B, T, S)
        return torch.softmax(scores.masked_fill(pad_mask.unsqueeze(1), float("-inf")), dim=-1)
