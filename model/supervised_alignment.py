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
    heads   an added head only, default 1: that many dot-product heads, their distributions averaged.
    self_attention  an added head only, default false: one non-causal self-attention sublayer over
            layer `layer`'s states of the whole target before the queries (Garg et al. §4.3, full
            target context).
    diagonal  an added head only, default false: a learned weight per head on −|i/S − t/T|, the
            distance of a link from the pair's diagonal (fast_align's distortion prior).
    link_threshold  default 0: the hard links' agreement threshold (model.alignments.symmetrisation.matrix_links).
    With self_attention or diagonal the head reads the whole target, so its rows come from one forced
    pass of each finished hypothesis (model/decoding/finished_alignment.py) instead of the decoding steps.

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
import torch.nn.functional as F
from torch import nn

ADDED = "added"

KNOWN = ("head", "layer", "weight", "heads", "self_attention", "diagonal", "link_threshold")
# The rest default to the step-wise single head: heads 1, self_attention and diagonal false,
# link_threshold 0 (every symmetrised link kept).
REQUIRED = ("head", "layer", "weight")
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
    for name in REQUIRED:
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
    heads = options.get("heads", 1)
    if not _is_int(heads) or heads < 1:
        problems.append(f"{PREFIX}: heads must be an integer >= 1, got {heads!r}")
    for flag in ("self_attention", "diagonal"):
        if not isinstance(options.get(flag, False), bool):
            problems.append(f"{PREFIX}: {flag} must be true or false, got {options[flag]!r}")
    threshold = options.get("link_threshold", 0.0)
    if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or not 0 <= threshold < 1:
        problems.append(f"{PREFIX}: link_threshold must be a number in [0, 1), got {threshold!r}")
    added_only = [name for name, default in (("heads", 1), ("self_attention", False), ("diagonal", False))
                  if options.get(name, default) != default]
    if head != ADDED and added_only:
        problems.append(f"{PREFIX}: {', '.join(added_only)} describe(s) an added head; set head to {ADDED!r}")
    weight = options.get("weight", 0.0)
    if not isinstance(weight, (int, float)) or isinstance(weight, bool) or not math.isfinite(weight) or weight < 0:
        problems.append(f"{PREFIX}: weight must be a number >= 0, got {weight!r}")
    return problems


def _ngram_head_problems(config: Any, head: int) -> list[str]:
    from model.attention.ngram_options import ngram_spec

    spec = ngram_spec(dict(config.cross_attention.options), config.n_heads)
    if len(spec.groups) == 1:
        return []  # heterogeneous / interleaved: every head attends to every size
    sizes = [group.ngrams for group in spec.groups for _ in range(group.heads)]
    if sizes[head] == (1,):
        return []
    unigram = [h for h, s in enumerate(sizes) if s == (1,)]
    where = f"heads {unigram} are" if unigram else "no head is"
    return [f"{PREFIX}: head {head} of the homogeneous cross-attention attends to {sizes[head][0]}-grams and can "
            f"put at most 1/{sizes[head][0]} of its weight on one word; supervise a unigram head ({where} unigram)"]


def diagonal_distance(source_pad: torch.Tensor, target_pad: torch.Tensor) -> torch.Tensor:
    """|i/S − t/T| for every row t and column i (B, T, S): how far a link lies from the diagonal of
    its sentence pair, S and T the unpadded widths (EOS and BOS included); the distortion term of
    fast_align (Dyer et al. 2013, eq. 2: h(i, j, m, n) = −|i/m − j/n|), which eflomal's model also has.
    source_pad (B, S), target_pad (B, T): True = padding."""
    n_source = (~source_pad).sum(dim=1).clamp_min(1).float()  # (B,)
    n_target = (~target_pad).sum(dim=1).clamp_min(1).float()  # (B,)
    i = torch.arange(source_pad.shape[1], device=source_pad.device).float()[None, :] / n_source[:, None]  # (B, S)
    t = torch.arange(target_pad.shape[1], device=target_pad.device).float()[None, :] / n_target[:, None]  # (B, T)
    return (t[:, :, None] - i[:, None, :]).abs()  # (B, T, S)


def head_averaged_attention(queries: torch.Tensor, keys: torch.Tensor, pad_mask: torch.Tensor,
                            bias: torch.Tensor | None = None) -> torch.Tensor:
    """Vaswani et al. (2017, eq. 1) per head, the heads' distributions averaged (Garg et al. 2019,
    §4.2, average several heads' attention for the alignment): queries (B, T, H, dₕ), keys (B, S, H, dₕ),
    pad_mask (B, S), bias (B, H, T, S) added to the logits -> mean over h of softmax(q_h k_hᵀ/√dₕ + bias_h),
    (B, T, S) in float32."""
    q = queries.float().transpose(1, 2)  # (B, H, T, dₕ)
    k = keys.float().permute(0, 2, 3, 1)  # (B, H, dₕ, S)
    scores = torch.matmul(q, k) / math.sqrt(q.shape[-1])  # (B, H, T, S)
    if bias is not None:
        scores = scores + bias
    scores = scores.masked_fill(pad_mask[:, None, None, :], float("-inf"))
    return torch.softmax(scores, dim=-1).mean(dim=1)  # (B, T, S)


def full_self_attention(x: torch.Tensor, qkv: nn.Linear, out: nn.Linear, n_heads: int,
                        pad_mask: torch.Tensor) -> torch.Tensor:
    """Non-causal multi-head self-attention (Vaswani et al. 2017, eq. 1 and the multi-head
    projection): every target position reads every other (Garg et al. 2019, §4.3, "full target
    context"), padding (pad_mask (B, T), True = padding) masked as keys. x (B, T, D) -> (B, T, D)."""
    b, t, d = x.shape
    q, k, v = qkv(x).view(b, t, 3, n_heads, d // n_heads).permute(2, 0, 3, 1, 4)  # each (B, H, T, dₕ)
    keep = ~pad_mask[:, None, None, :]  # (B, 1, 1, T)
    context = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)  # (B, H, T, dₕ)
    return out(context.transpose(1, 2).reshape(b, t, d))  # (B, T, D)


class SupervisedAlignment(nn.Module):
    """The validated options of a config, and for an added head its parameters: a query LayerNorm,
    query and key projections of `heads` heads of one attention head's width; with self_attention
    one non-causal self-attention sublayer over the layer's states before the queries; with
    diagonal one weight per head on the distance from the diagonal."""

    def __init__(self, config: Any):
        super().__init__()
        options = dict(config.supervised_alignment)
        self.layer_index: int = options["layer"] % config.decoder_layers
        self.added = options["head"] == ADDED
        self.head: int | None = None if self.added else options["head"]
        self.weight = float(options["weight"])
        self.n_heads: int = options.get("heads", 1)
        self.self_attention: bool = options.get("self_attention", False)
        self.diagonal: bool = options.get("diagonal", False)
        # Both read the whole target (every position; its length), so the rows exist only for a
        # finished sequence (a forced pass, `Transformer.forward`), never step by step.
        self.needs_finished_target = self.self_attention or self.diagonal
        # The hard links' agreement threshold (model.alignments.symmetrisation.matrix_links).
        self.link_threshold = float(options.get("link_threshold", 0.0))
        if self.added:
            d = config.d_model
            width = d // config.n_heads
            if self.self_attention:
                self.context_heads = config.n_heads
                self.context_norm = nn.LayerNorm(d)
                self.context_qkv = nn.Linear(d, 3 * d)
                self.context_out = nn.Linear(d, d)
            if self.diagonal:
                self.diagonal_weight = nn.Parameter(torch.zeros(self.n_heads))
            self.query_norm = nn.LayerNorm(d)
            self.q_proj = nn.Linear(d, self.n_heads * width)
            self.k_proj = nn.Linear(d, self.n_heads * width)

    def select(self, probs: torch.Tensor) -> torch.Tensor:
        """An existing head: the layer's cross-attention (B, H, T, S) -> that head's (B, T, S)."""
        return probs[:, self.head]  # (B, T, S)

    def keys(self, memory: torch.Tensor) -> torch.Tensor:
        """An added head: encoder output (B, S, D) -> its keys (B, S, heads·dₕ), once per source."""
        return self.k_proj(memory)

    def attend(self, x: torch.Tensor, keys: torch.Tensor, pad_mask: torch.Tensor,
               target_pad_mask: torch.Tensor | None = None) -> torch.Tensor:
        """An added head: layer output x (B, T, D), keys (B, S, heads·dₕ), pad_mask (B, S) -> the
        heads' averaged softmax(qkᵀ/√dₕ − w_h·|i/S − t/T|) (B, T, S) in float32 (nothing reads a
        context; the distance term with diagonal only). With needs_finished_target, x is every
        position of a finished target and target_pad_mask (B, T) its padding."""
        if self.needs_finished_target and target_pad_mask is None:
            raise ValueError("this alignment head reads the whole target: give every position and its padding mask")
        if self.self_attention:
            x = x + full_self_attention(self.context_norm(x), self.context_qkv, self.context_out,
                                        self.context_heads, target_pad_mask)  # (B, T, D)
        bias = None
        if self.diagonal:
            distance = diagonal_distance(pad_mask, target_pad_mask)  # (B, T, S)
            bias = -self.diagonal_weight.float()[None, :, None, None] * distance[:, None]  # (B, heads, T, S)
        b, t, _ = x.shape
        q = self.q_proj(self.query_norm(x)).view(b, t, self.n_heads, -1)  # (B, T, heads, dₕ)
        k = keys.view(b, keys.shape[1], self.n_heads, -1)  # (B, S, heads, dₕ)
        return head_averaged_attention(q, k, pad_mask, bias)
