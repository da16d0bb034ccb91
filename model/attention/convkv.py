"""ConvKV: keys and values become n-gram vectors by a learned width-n convolution; queries stay tokens.

Nguyen & Joty, "Phrase-Based Attentions" (eq. 5):

    ConvKV(Q, K, V) = softmax( (Q W_q) Conv_n(K, W_k)ᵀ / √d_k ) Conv_n(V, W_v)

Conv_n over the layer input x, left zero-padded, gives one n-gram vector per position:
k_n(s) = b + Σ_{m=0}^{n-1} W_{k,m} x_{s-n+1+m}. For n = 1 this is the plain key projection, so
the unigram heads are exactly vanilla heads. Each (head group, n) pair has one Conv1d of width n
for the keys and one for the values of that group; all of them (and, in self-attention, the
query projection) run as one matmul over the row windows.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from model.attention.functional import split_heads
from model.attention.ngram_attention import NgramAttention, heads_by_size, qk_scale
from model.attention.registry import register_attention


def convkv_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """q (B, h, T, dh), n-gram keys (B, h, S, G, dh) -> scores (B, h, T, G·S) = q·k_n(s)/√dh (eq. 5)."""
    keys = k.transpose(2, 3).flatten(2, 3)  # (B, h, G·S, dh)
    return torch.matmul(q, keys.transpose(-2, -1)) * qk_scale(q.shape[-1])


@register_attention("convkv")
class ConvKVAttention(NgramAttention):
    kind = "convkv"

    def _build(self) -> None:
        d, dh = self.d_model, self.head_dim
        self.q_proj = nn.Linear(d, d)
        # keys[g][i] / values[g][i]: the width-n convolutions of group g for its i-th size.
        self.keys = nn.ModuleList(
            nn.ModuleList(nn.Conv1d(d, group.heads * dh, n) for n in group.ngrams) for group in self.spec.groups
        )
        self.values = nn.ModuleList(
            nn.ModuleList(nn.Conv1d(d, group.heads * dh, n) for n in group.ngrams) for group in self.spec.groups
        )

    def _source_parts(self) -> list[list[nn.Module]]:
        # One output, channels (size, key|value, head, dh): per size of a heterogeneous group its keys
        # then values; for homogeneous heads (one size each) every group's keys, then their values.
        if len(self.spec.groups) == 1:
            return [[conv for pair in zip(self.keys[0], self.values[0]) for conv in pair]]
        return [[convs[0] for convs in self.keys] + [convs[0] for convs in self.values]]

    def _key_tail_shape(self) -> tuple[int, ...]:
        return (self.sizes_per_head, self.head_dim)

    def _split_queries(self, q: torch.Tensor) -> torch.Tensor:
        return split_heads(q, self.n_heads)  # (B, H, Tq, dh)

    def _keys_values(self, outs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        kv = heads_by_size(outs[0], 2, self.n_heads, self.sizes_per_head)  # (2, B, H, S, G, dh)
        return kv[0], kv[1]

    def _scores(self, q: torch.Tensor, k: torch.Tensor, g: int) -> torch.Tensor:
        return convkv_scores(q, k)

    def _fused_context(self, q, k, values, hidden, dropout, may_be_empty):
        """Scores, softmax and values in one fused kernel (flash / memory-efficient on GPU)."""
        keys = k.transpose(2, 3).flatten(2, 3)  # (B, h, G·S, dh)
        if hidden is None:
            return F.scaled_dot_product_attention(q, keys, values, dropout_p=dropout)
        if not may_be_empty:
            return F.scaled_dot_product_attention(q, keys, values, attn_mask=~hidden, dropout_p=dropout)
        # A row with no n-gram at all gives zeros, not NaN: it attends everywhere and is zeroed after.
        empty = hidden.all(dim=-1, keepdim=True)  # (B|1, 1, Tq|1, 1)
        context = F.scaled_dot_product_attention(q, keys, values, attn_mask=~hidden | empty, dropout_p=dropout)
        return context.masked_fill(empty, 0.0)  # (B, h, Tq, dh)
