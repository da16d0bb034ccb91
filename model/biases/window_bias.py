"""What the Markov and local-fertility terms share: learned weights over a window of an attention signal.

bias[b, h, t, i] = Σ_{o=-k..k} w[h, o] · x[b, h, t, i+o], with x the signal the subclass reads
(the previous step's unbiased attention, or its coverage) of the SAME head h, zero outside the
sentence. The features are per head, not head-averaged: each head keeps its own alignment
pattern (one head may track the diagonal while another attends to the EOS), and a head's bias
then depends only on that head's own history.

The weights start at zero, so a biased model starts as the unbiased one; their gradient is the
window features times the logits' gradient, non-zero from the second target step on.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from model.biases.features import window
from model.biases.history import History

DEFAULT_WINDOW = 1


def validate_window_options(name: str, options: dict[str, Any]) -> list[str]:
    problems = []
    unknown = sorted(set(options) - {"window"})
    if unknown:
        problems.append(f"alignment_biases.{name}: unknown option(s) {unknown}; known options: window")
    k = options.get("window", DEFAULT_WINDOW)
    if not (isinstance(k, int) and not isinstance(k, bool) and k >= 0):
        problems.append(f"alignment_biases.{name}.window must be a non-negative integer, got {k!r}")
    return problems


def windowed_bias(signal: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Σ_o w[h, o] · ξ_k(signal; i)[o] (Cohn et al. §3.2 for the previous step, §3.3 for the coverage).

    signal (B, H, T, S) fp32, weight (H, 2k+1) -> (B, H, T, S) fp32.
    """
    k = (weight.shape[1] - 1) // 2
    features = window(signal.float(), k)  # (B, H, T, S, 2k+1)
    # A product and a sum, not einsum: autocast would run einsum in bf16; this stays fp32.
    return (features * weight.float().view(1, weight.shape[0], 1, 1, -1)).sum(dim=-1)  # (B, H, T, S)


class WindowBias(nn.Module):
    """Base of `markov` and `fertility`: subclasses set `name` and `reads`."""

    name = ""
    reads = ""

    def __init__(self, n_heads: int, options: dict[str, Any]):
        super().__init__()
        self.window = int(options.get("window", DEFAULT_WINDOW))
        self.weight = nn.Parameter(torch.zeros(n_heads, 2 * self.window + 1))  # (H, 2k+1): offsets -k..k

    @classmethod
    def validate_options(cls, options: dict[str, Any]) -> list[str]:
        return validate_window_options(cls.name, options)

    def forward(self, history: History, lengths: torch.Tensor, source_len: int) -> torch.Tensor:
        signal = getattr(history, self.reads)
        return windowed_bias(signal, self.weight)
