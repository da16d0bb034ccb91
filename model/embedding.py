"""Token embeddings scaled by √d plus fixed sinusoidal positions (Vaswani et al., §3.5), and the
contextualisation of the source word embeddings (+C of Choi, Cho & Bengio's fine-grained attention).

+C (Choi et al. 2018 §4.3, the method of their "Context-dependent word representation for neural
machine translation", 2017): each source word embedding is masked by a gate computed from the whole
sentence, a nonlinear bag of words, before the encoder reads it:

    c      = (1/S) Σ_s tanh(W e_s + b)        over the S real (non-padding) tokens of the sentence
    ẽ_s    = e_s ⊙ σ(c)                       then the positions are added as usual

e_s is the token's embedding as the model uses it (× √d); the paper's NN_θ is a feed-forward
network, here one tanh layer (W, b: d × d, d). The gate is the same at every position of a
sentence, but it multiplies the embeddings, so it does not cancel anywhere the way a per-sentence
vector added to the keys cancels in attention's softmax over source positions. Only the encoder's
input changes: decoding, its state and the exported step graphs are untouched.
"""
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


class SentenceGate(nn.Module):
    """σ(c), c = the mean over a sentence's real tokens of tanh(W e_s + b) (+C, module docstring)."""

    def __init__(self, d_model: int):
        super().__init__()
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, words: torch.Tensor, pad_mask: torch.Tensor) -> torch.Tensor:
        """words (B, S, D) embeddings, pad_mask (B, S) True at padding -> gate (B, 1, D) in (0, 1)."""
        hidden = torch.tanh(self.proj(words))  # (B, S, D)
        real = (~pad_mask).unsqueeze(-1).to(hidden.dtype)  # (B, S, 1)
        context = (hidden * real).sum(dim=1, keepdim=True) / real.sum(dim=1, keepdim=True).clamp(min=1.0)  # (B, 1, D)
        return torch.sigmoid(context)


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size: int, d_model: int, max_positions: int, pad_id: int, dropout: float,
                 contextual: bool = False):
        super().__init__()
        self.pad_id = pad_id
        # +C: the words of a sentence masked by its gate (source side only; module docstring).
        self.gate = SentenceGate(d_model) if contextual else None
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
        words = self.tokens(tokens) * self.scale  # (B, T, D)
        if self.gate is not None:
            words = words * self.gate(words, tokens.eq(self.pad_id))  # (B, T, D) ⊙ (B, 1, D)
        return self.dropout(words + positions)
