"""Token embeddings scaled by √d plus fixed sinusoidal positions (Vaswani et al., §3.5)."""
from __future__ import annotations

import math

import torch
from torch import nn


def sinusoidal_table(max_positions: int, d_model: int) -> torch.Tensor:
    """(max_positions, d_model): sin on even dimensions, cos on odd ones."""
    position = torch.arange(max_positions, dtype=torch.float32).unsqueeze(1)  # (P, 1)
    frequency = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_positions, d_model)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: d_model // 2])
    return table


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size: int, d_model: int, max_positions: int, pad_id: int, dropout: float):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        nn.init.normal_(self.tokens.weight, mean=0.0, std=d_model**-0.5)
        with torch.no_grad():
            self.tokens.weight[pad_id].zero_()
        self.scale = math.sqrt(d_model)
        self.register_buffer("positions", sinusoidal_table(max_positions, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, tokens: torch.Tensor, start: int | torch.Tensor = 0) -> torch.Tensor:
        """tokens (B, T) at positions start..start+T-1 -> (B, T, D); start an int, or (B,) int64
        for a position per row (the decoding state's "position")."""
        length = tokens.shape[1]
        if isinstance(start, torch.Tensor) and start.dim() == 1:
            at = start.unsqueeze(1) + torch.arange(length, device=start.device)  # (B, T)
            positions = self.positions[at]  # (B, T, D)
        else:
            positions = self.positions.narrow(0, start, length).unsqueeze(0)  # (1, T, D)
        return self.dropout(self.tokens(tokens) * self.scale + positions)
