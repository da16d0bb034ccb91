"""The position bias (Cohn et al. §3.1): where in the source a target position tends to align.

The paper's score is an MLP over content and position together,
f(t, i) = vᵀ tanh(W^(ae) eᵢ + W^(ah) g_t + W^(ap) ψ(i, t, S)), ψ = [log(1+i), log(1+t), log(1+S)]
(source position, target position, source length). In a Transformer the content part of the score
is QKᵀ/√dₕ, which has no hidden layer to put W^(ap)ψ into, so the position part becomes its own
small score with the same shape, one output per head, added to that head's logits:

    b[h, t, i] = u_hᵀ tanh(W ψ(i, t, S) + a) + c_h

This is the paper's score with the content terms held at zero (W, u_h playing W^(ap), v), added to
the content score instead of sharing its tanh: what it gives up is the interaction of position and
content inside one nonlinearity (in the paper the position can change how much the content counts,
here it shifts the logits by an amount that depends on (i, t, S) and the head only). The constant
c_h does not change the softmax; it is kept so that the layer is an ordinary Linear.

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
