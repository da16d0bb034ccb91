"""QueryK: each query is its own width-n kernel, convolved over the token keys.

Nguyen & Joty, "Phrase-Based Attentions" (eq. 6):

    QueryK(Q, K, V) = softmax( Conv_n(K W_k, Q W_q) / √(d_k · n) ) Conv_n(V, W_v)

Q W_q gives every query n·d_k numbers per head and n-gram size n: a kernel of n rows
q^(0..n-1). Its score for the n-gram ending at s (tokens s-n+1..s) is
⟨concat(q^(0), …, q^(n-1)), concat(k_{s-n+1}, …, k_s)⟩ / √(d_k·n). The keys stay token keys
(one projection); the values are width-n convolutions of the layer input, as in ConvKV.
Vectorised as one matmul of all kernel rows against all keys and one index_add into n-grams.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from model.attention.functional import inference_constants_allowed, split_heads
from model.attention.ngram_attention import NgramAttention, heads_by_size, qk_scale
from model.attention.registry import register_attention


def kernel_rows(ngrams: tuple[int, ...]) -> tuple[list[int], list[int]]:
    """For every kernel row (n, m), n-major: the index g of its size and its shift n-1-m.

    Row m of the size-n kernel meets key u as the m-th token of the n-gram ending at u+n-1-m.
    """
    sizes, shifts = [], []
    for g, n in enumerate(ngrams):
        for m in range(n):
            sizes.append(g)
            shifts.append(n - 1 - m)
    return sizes, shifts


def kernel_targets(size: torch.Tensor, shift: torch.Tensor, length: int, n_max: int) -> torch.Tensor:
    """(J·S,): where kernel row j's partial score against key u lands among the n-grams laid out
    (G, S+n_max-1) and flattened: the n-gram of size index size[j] ending at u + shift[j] (`kernel_rows`
    as tensors). Ends past the last key get the room after it, cut off afterwards."""
    span = length + n_max - 1
    return (torch.add(shift, size, alpha=span).unsqueeze(1) + torch.arange(length, device=size.device)).flatten()


def queryk_scores(
    q: torch.Tensor, k: torch.Tensor, ngrams: tuple[int, ...], prescaled: bool = False,
    rows: tuple[torch.Tensor, torch.Tensor] | None = None, targets: torch.Tensor | None = None,
) -> torch.Tensor:
    """Query kernels q (B, h, T, Σn·dh) over token keys k (B, h, S, dh) -> scores (B, h, T, G·S) (eq. 6).

    score_n(t, s) = Σ_m ⟨q_t^(n,m), k_{s-n+1+m}⟩ / √(n·dh) = ⟨kernel, concat(k_{s-n+1}, …, k_s)⟩ / √(n·dh).
    Computed as one matmul of every kernel row against every key, each partial score then added
    (one index_add) to the n-gram it belongs to; keys before position 0 are zeros, so their
    partial scores do not exist. prescaled: the kernels already carry 1/√(n·dh) (the module
    applies it in one op). rows: `kernel_rows` as tensors (size index, shift) on k's device; targets:
    `kernel_targets` of them for k's length, when the caller keeps them.
    """
    b, h, t = q.shape[:3]
    s, dh = k.shape[-2], k.shape[-1]
    if ngrams == (1,):  # unigram kernels are plain queries
        return torch.matmul(q, k.transpose(-2, -1)) * (1.0 if prescaled else qk_scale(dh))  # (B, h, T, S)
    g_count, j_count, n_max = len(ngrams), sum(ngrams), max(ngrams)
    if not prescaled:
        scale = torch.tensor([1.0 / math.sqrt(n * dh) for n in ngrams for _ in range(n * dh)], dtype=q.dtype, device=q.device)
        q = q * scale
    if targets is None:
        if rows is None:
            rows = tuple(torch.tensor(r, device=k.device) for r in kernel_rows(ngrams))
        targets = kernel_targets(*rows, s, n_max)
    partial = torch.matmul(q.reshape(b, h, t * j_count, dh), k.transpose(-2, -1))  # (B, h, T·J, S): ⟨q^(n,m), k_u⟩
    span = s + n_max - 1  # n-gram ends u+n-1-m may run past the last key: room for them, cut below
    scores = partial.new_zeros(b, h, t, g_count * span).index_add(-1, targets, partial.view(b, h, t, j_count * s))
    return scores.view(b, h, t, g_count, span)[..., :s].flatten(-2)  # (B, h, T, G·S)


@register_attention("queryk")
class QueryKAttention(NgramAttention):
    kind = "queryk"

    def _build(self) -> None:
        d, dh = self.d_model, self.head_dim
        # Per group, every head has one kernel of n·dh numbers for each of its sizes n.
        self.query_widths = [group.heads * sum(group.ngrams) * dh for group in self.spec.groups]
        self.q_proj = nn.Linear(d, sum(self.query_widths))
        self.k_proj = nn.Linear(d, d)
        # values[g][i]: the width-n value convolution of group g for its i-th size.
        self.values = nn.ModuleList(
            nn.ModuleList(nn.Conv1d(d, group.heads * dh, n) for n in group.ngrams) for group in self.spec.groups
        )
        # 1/√(n·dh) for every number of every kernel, applied to the queries in one op (a constant).
        scale = [qk_scale(n * dh) for group in self.spec.groups for _ in range(group.heads)
                 for n in group.ngrams for _ in range(n * dh)]
        self.register_buffer("kernel_scale", torch.tensor(scale), persistent=False)  # (Wq,)
        for g, group in enumerate(self.spec.groups):  # constants of queryk_scores, kept on the module's device
            size, shift = kernel_rows(group.ngrams)
            self.register_buffer(f"rows_size_{g}", torch.tensor(size), persistent=False)
            self.register_buffer(f"rows_shift_{g}", torch.tensor(shift), persistent=False)

    def _source_parts(self) -> list[list[nn.Module]]:
        # Token keys; then the values, channels (size, head, dh) (homogeneous: the groups' heads side by side).
        return [[self.k_proj], [conv for convs in self.values for conv in convs]]

    def _key_tail_shape(self) -> tuple[int, ...]:
        return (self.head_dim,)

    def _split_queries(self, q: torch.Tensor) -> list[torch.Tensor]:
        q = q * self.kernel_scale.to(q.dtype)  # (B, Tq, Wq)
        parts = [q] if len(self.query_widths) == 1 else q.split(self.query_widths, dim=-1)
        # (B, h, Tq, Σn·dh) per group
        return [part.unflatten(-1, (group.heads, -1)).transpose(1, 2) for group, part in zip(self.spec.groups, parts)]

    def _keys_values(self, outs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        keys = split_heads(outs[0], self.n_heads)  # (B, H, S, dh)
        return keys, heads_by_size(outs[1], 1, self.n_heads, self.sizes_per_head)[0]  # (B, H, S, G, dh)

    def _scores(self, q: torch.Tensor, k: torch.Tensor, g: int) -> torch.Tensor:
        ngrams = self.spec.groups[g].ngrams
        rows = (getattr(self, f"rows_size_{g}"), getattr(self, f"rows_shift_{g}"))
        targets = None
        if ngrams != (1,) and inference_constants_allowed():  # a search's steps share them
            length = k.shape[-2]
            targets = self._kept(("targets", g, length), list(rows), lambda: kernel_targets(*rows, length, max(ngrams)))
        return queryk_scores(q, k, ngrams, prescaled=True, rows=rows, targets=targets)
