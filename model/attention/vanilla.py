"""Multi-head scaled dot-product attention (Vaswani et al., 2017), full pass and incremental step."""
from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from model.attention.contract import AttentionModule, AttentionOut
from model.attention.functional import attention_mask, dropout, merge_heads, scaled_dot_product_probs, split_heads
from model.attention.registry import register_attention

State = dict[str, torch.Tensor]


@register_attention("vanilla")
class VanillaAttention(AttentionModule):
    """softmax(QKᵀ/√dₕ)V per head.

    Self-attention sites cache the keys and values of every step so far; the cross-attention site
    projects the encoder memory once in `init_state` and reuses it at every step.
    """

    token_level = True  # token_logits and mix below

    def __init__(self, d_model: int, n_heads: int, dropout: float, site: str, options: dict[str, Any]):
        super().__init__()
        self.n_heads = n_heads
        self.site = site
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    @staticmethod
    def validate_options(options: dict[str, Any], site: str) -> list[str]:
        if options:
            return [f"{site}: attention kind 'vanilla' takes no options, got {sorted(options)}"]
        return []

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor | None = None,
        *,
        key_padding_mask: torch.Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
        need_phrase_attention: bool = False,
    ) -> AttentionOut:
        """x (B, T, D) queries; memory (B, S, D) keys/values for cross-attention, else x itself.

        Returns the output (B, T, D) and, when asked, the probabilities (B, H, T, S); no phrases.
        """
        source = x if memory is None else memory
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, H, T, dh)
        k = split_heads(self.k_proj(source), self.n_heads)  # (B, H, S, dh)
        v = split_heads(self.v_proj(source), self.n_heads)  # (B, H, S, dh)
        return self._attend(q, k, v, key_padding_mask, causal, need_weights or need_phrase_attention)

    def init_state(self, memory: torch.Tensor | None, batch_size: int, device: torch.device, dtype: torch.dtype) -> State:
        """Decoding state of this site: projected memory for cross-attention, an empty cache for self."""
        if self.site == "cross":
            assert memory is not None
            return {
                "k": split_heads(self.k_proj(memory), self.n_heads),  # (N, H, S, dh)
                "v": split_heads(self.v_proj(memory), self.n_heads),  # (N, H, S, dh)
            }
        head_dim = self.q_proj.out_features // self.n_heads
        empty = torch.zeros(batch_size, self.n_heads, 0, head_dim, device=device, dtype=dtype)  # (N, H, 0, dh)
        return {"k": empty, "v": empty.clone()}

    def sentence_state(self) -> frozenset[str]:
        return frozenset({"k", "v"}) if self.site == "cross" else frozenset()

    def step(
        self,
        x: torch.Tensor,
        state: State,
        *,
        key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = False,
        need_phrase_attention: bool = False,
    ) -> AttentionOut:
        """One decoding step: x (N, 1, D) -> output (N, 1, D), probabilities (N, H, 1, S), new state."""
        q = split_heads(self.q_proj(x), self.n_heads)  # (N, H, 1, dh)
        if self.site == "cross":
            k, v, new_state = state["k"], state["v"], state
        else:
            k = torch.cat([state["k"], split_heads(self.k_proj(x), self.n_heads)], dim=2)  # (N, H, t+1, dh)
            v = torch.cat([state["v"], split_heads(self.v_proj(x), self.n_heads)], dim=2)  # (N, H, t+1, dh)
            new_state = {"k": k, "v": v}
        attended = self._attend(q, k, v, key_padding_mask, False, need_weights or need_phrase_attention)
        return AttentionOut(attended.out, attended.probs, state=new_state)

    # -- token-level protocol (model/biases reads it): logits and value mixing as separate steps --
    def token_logits(self, x: torch.Tensor, state: State) -> torch.Tensor:
        """Cross-attention logits QKᵀ/√dₕ (Vaswani et al., eq. 1) before masking, in fp32.

        x (B, T, D) queries; state: what `init_state(memory, ...)` returns (the projected memory).
        Returns (B, H, T, S): the scores `_attend` would softmax, so that a caller may add terms
        to them (the structural alignment biases) before its own masked softmax.
        """
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, H, T, dh)
        k = state["k"]  # (B, H, S, dh)
        return torch.matmul(q.float(), k.float().transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))  # (B, H, T, S)

    def mix(self, probs: torch.Tensor, state: State) -> torch.Tensor:
        """probs (B, H, T, S) -> output (B, T, D): attention dropout, the values, the output projection."""
        v = state["v"]  # (B, H, S, dh)
        context = torch.matmul(dropout(probs, self.dropout, self.training).to(v.dtype), v)  # (B, H, T, dh)
        return self.out_proj(merge_heads(context))

    def _attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        key_padding_mask: torch.Tensor | None,
        causal: bool,
        need_weights: bool,
    ) -> AttentionOut:
        mask = attention_mask(key_padding_mask, q.shape[2], k.shape[2], causal, q.device)
        if need_weights:
            probs = scaled_dot_product_probs(q, k, mask)  # (B, H, T, S)
            context = torch.matmul(dropout(probs, self.dropout, self.training).to(v.dtype), v)  # (B, H, T, dh)
        else:
            # The fused kernel (flash / memory-efficient on GPU) when nobody reads the weights.
            probs = None
            dropout_p = self.dropout if self.training else 0.0
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)  # (B, H, T, dh)
        return AttentionOut(self.out_proj(merge_heads(context)), probs)
