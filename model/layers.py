"""Pre-norm encoder and decoder layers: x + Dropout(Sublayer(LayerNorm(x)))."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from model.attention.registry import attention_class
from model.config import ModelConfig

State = dict[str, torch.Tensor]


def has_phrases(attention: nn.Module) -> bool:
    """Whether an attention module reports source n-grams (phrasal cross-attention does)."""
    return getattr(attention, "phrase_sizes", 0) > 0


def build_attention(config: ModelConfig, site: str) -> nn.Module:
    spec = config.attention(site)
    cls = attention_class(spec.kind)
    return cls(config.d_model, config.n_heads, config.attention_dropout, site, dict(spec.options))


class FeedForward(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.up = nn.Linear(config.d_model, config.d_ff)
        self.down = nn.Linear(config.d_ff, config.d_model)
        self.activation_dropout = config.activation_dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = F.dropout(F.relu(self.up(x)), self.activation_dropout, self.training)
        return self.down(hidden)


class EncoderLayer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.self_norm = nn.LayerNorm(config.d_model)
        self.self_attention = build_attention(config, "encoder_self")
        self.ffn_norm = nn.LayerNorm(config.d_model)
        self.ffn = FeedForward(config)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, pad_mask: torch.Tensor) -> torch.Tensor:
        attended, _ = self.self_attention(self.self_norm(x), key_padding_mask=pad_mask)
        x = x + self.dropout(attended)
        return x + self.dropout(self.ffn(self.ffn_norm(x)))


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.self_norm = nn.LayerNorm(config.d_model)
        self.self_attention = build_attention(config, "decoder_self")
        self.cross_norm = nn.LayerNorm(config.d_model)
        self.cross_attention = build_attention(config, "cross")
        self.ffn_norm = nn.LayerNorm(config.d_model)
        self.ffn = FeedForward(config)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self, x: torch.Tensor, memory: torch.Tensor, memory_pad_mask: torch.Tensor, need_weights: bool,
        need_phrases: bool = False,
    ):
        """x (B, T, D), memory (B, S, D) -> (B, T, D) and cross-attention (B, H, T, S) when asked.

        With need_phrases (implies need_weights) a third value: the phrase table (B, H, T, n_max, S)
        of a phrasal cross-attention, or the token attention as 1-grams (B, H, T, 1, S) otherwise.
        """
        attended, _ = self.self_attention(self.self_norm(x), causal=True)
        x = x + self.dropout(attended)
        phrases = None
        if need_phrases and has_phrases(self.cross_attention):
            attended, probs, phrases = self.cross_attention(
                self.cross_norm(x), memory, key_padding_mask=memory_pad_mask, need_weights=True, need_phrases=True
            )
        else:
            attended, probs = self.cross_attention(
                self.cross_norm(x), memory, key_padding_mask=memory_pad_mask, need_weights=need_weights or need_phrases
            )
            if need_phrases:
                phrases = probs.unsqueeze(3)  # (B, H, T, 1, S): a token is the 1-gram starting there
        x = x + self.dropout(attended)
        out = x + self.dropout(self.ffn(self.ffn_norm(x)))
        return (out, probs, phrases) if need_phrases else (out, probs)

    def init_state(self, memory: torch.Tensor) -> dict[str, State]:
        n = memory.shape[0]
        return {
            "self": self.self_attention.init_state(None, n, memory.device, memory.dtype),
            "cross": self.cross_attention.init_state(memory, n, memory.device, memory.dtype),
        }

    def step(
        self, x: torch.Tensor, state: dict[str, State], memory_pad_mask: torch.Tensor, need_weights: bool,
        need_phrases: bool = False,
    ):
        """x (N, 1, D) -> (N, 1, D), cross-attention (N, H, 1, S) when asked, new state.

        With need_phrases the phrase table (N, H, 1, n_max, S) comes before the new state.
        """
        attended, _, self_state = self.self_attention.step(self.self_norm(x), state["self"])
        x = x + self.dropout(attended)
        phrases = None
        if need_phrases and has_phrases(self.cross_attention):
            attended, probs, phrases, cross_state = self.cross_attention.step(
                self.cross_norm(x), state["cross"], key_padding_mask=memory_pad_mask, need_weights=True, need_phrases=True
            )
        else:
            attended, probs, cross_state = self.cross_attention.step(
                self.cross_norm(x), state["cross"], key_padding_mask=memory_pad_mask,
                need_weights=need_weights or need_phrases,
            )
            if need_phrases:
                phrases = probs.unsqueeze(3)  # (N, H, 1, 1, S)
        x = x + self.dropout(attended)
        out = x + self.dropout(self.ffn(self.ffn_norm(x)))
        new_state = {"self": self_state, "cross": cross_state}
        return (out, probs, phrases, new_state) if need_phrases else (out, probs, new_state)
