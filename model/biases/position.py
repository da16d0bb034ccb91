"""The position bias (Cohn et al. §3.1): where in the source a target position tends to align.

The paper adds W^(ap)·ψ(i, t, S) inside the tanh of its MLP attention score,
ψ = [log(1+i), log(1+t), log(1+S)] (source position, target position, source length). In a
Transformer the content part of the score is QKᵀ/√dₕ, so the position part becomes its own
small score with the same shape, one output per head, added to that head's logits:

    b[h, t, i] = u_hᵀ tanh(W ψ(i, t, S) + a) + c_h

S is the real (unpadded) length of each sentence, so padding changes nothing. The target length
is not a feature: it is unknown while decoding.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from model.biases.features import position_features
from model.biases.history import History
from model.biases.registry import register_bias

DEFAULT_HIDDEN = 16
N_FEATURES = 3


@register_bias("position")
class PositionBias(nn.Module):
    reads = "position"

    def __init__(self, n_heads: int, options: dict[str, Any]):
        super().__init__()
        hidden = int(options.get("hidden", DEFAULT_HIDDEN))
        self.hidden = nn.Linear(N_FEATURES, hidden)
        self.out = nn.Linear(hidden, n_heads)

    @staticmethod
    def validate_options(options: dict[str, Any]) -> list[str]:
        problems = []
        unknown = sorted(set(options) - {"hidden"})
        if unknown:
            problems.append(f"alignment_biases.position: unknown option(s) {unknown}; known options: hidden")
        hidden = options.get("hidden", DEFAULT_HIDDEN)
        if not (isinstance(hidden, int) and not isinstance(hidden, bool) and hidden > 0):
            problems.append(f"alignment_biases.position.hidden must be a positive integer, got {hidden!r}")
        return problems

    def forward(self, history: History, lengths: torch.Tensor, source_len: int) -> torch.Tensor:
        """b = u_hᵀ tanh(W ψ + a) + c_h, ψ as in Cohn et al. §3.1 -> (B, H, T, S) fp32."""
        features = position_features(history.position, lengths, source_len).to(self.hidden.weight.dtype)  # (B, T, S, 3)
        scores = self.out(torch.tanh(self.hidden(features)))  # (B, T, S, H)
        return scores.float().permute(0, 3, 1, 2)  # (B, H, T, S)
