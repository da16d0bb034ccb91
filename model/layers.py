"""Pre-norm encoder and decoder layers: x + Dropout(Sublayer(LayerNorm(x)))."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from model.attention.registry import attention_class
from model.config import ModelConfig

State = dict[str, torch.Tensor]


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
        self, x: torch.Tensor, memory: torch.Tensor, memory_pad_mask: torch.Tensor, need_weights: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """x (B, T, D), memory (B, S, D) -> (B, T, D) and cross-attention (B, H, T, S) when asked."""
        attended, _ = self.self_attention(self.self_norm(x), causal=True)
        x = x + self.dropout(attended)
        attended, probs = self.cross_attention(
            self.cross_norm(x), memory, key_padding_mask=memory_pad_mask, need_weights=need_weights
        )
        x = x + self.dropout(attended)
        return x + self.dropout(self.ffn(self.ffn_norm(x))), probs

    def init_state(self, memory: torch.Tensor) -> dict[str, State]:
        n = memory.shape[0]
        return {
            "self": self.self_attention.init_state(None, n, memory.device, memory.dtype),
            "cross": self.cross_attention.init_state(memory, n, memory.device, memory.dtype),
        }

    def step(
        self, x: torch.Tensor, state: dict[str, State], memory_pad_mask: torch.Tensor, need_weights: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None, dict[str, State]]:
        """x (N, 1, D) -> (N, 1, D), cross-attention (N, H, 1, S) when asked, new state."""
        attended, _, self_state = self.self_attention.step(self.self_norm(x), state["self"])
        x = x + self.dropout(attended)
        attended, probs, cross_state = self.cross_attention.step(
            self.cross_norm(x), state["cross"], key_padding_mask=memory_pad_mask, need_weights=need_weights
        )
        x = x + self.dropout(attended)
        return x + self.dropout(self.ffn(self.ffn_norm(x))), probs, {"self": self_state, "cross": cross_state}
