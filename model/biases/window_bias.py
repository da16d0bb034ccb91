"""What the Markov and local-fertility terms share: learned weights over a window of an attention signal.

bias[b, h, t, i] = Σ_{o=-k..k} w[h, o] · x[b, h, t, i+o], with x the signal the subclass reads
(the previous step's attention, or its coverage) of the SAME head h, zero outside the sentence.
The features are per head, not head-averaged: each head keeps its own alignment pattern (one
head may track the diagonal while another attends to the EOS), and a head's bias then depends
only on that head's own history.

Options: "window" k (default 1) and "form", which attention the signal is made of:
- "recurrent" (Cohn et al. §3.2–§3.3, the paper's): the attention actually used at earlier steps,
  itself biased, so a learned bias compounds across steps; the layer's softmax runs step by step
  over the target in training (`model.biases.recurrence`).
- "parallel" (a Transformer adaptation): the same layer's UNBIASED attention at earlier steps, a
  shift and a cumsum over the whole target at once (`model.biases.features`).
Absent = "recurrent", the paper's: a config must name "parallel" to get the adaptation. (Models
trained before the default changed had "parallel" when they left the form out; the recipes and the
study have always named it.) Both forms decode incrementally with the same state.

The weights start at zero, so a biased model starts as the unbiased one; their gradient is the
window features times the logits' gradient, non-zero from the second target step on.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from model.biases.history import History

DEFAULT_WINDOW = 1
FORMS = ("parallel", "recurrent")
DEFAULT_FORM = "recurrent"
KNOWN_OPTIONS = ("form", "window")


def validate_window_options(name: str, options: dict[str, Any]) -> list[str]:
    problems = []
    unknown = sorted(set(options) - set(KNOWN_OPTIONS))
    if unknown:
        problems.append(f"alignment_biases.{name}: unknown option(s) {unknown}; known options: {', '.join(KNOWN_OPTIONS)}")
    k = options.get("window", DEFAULT_WINDOW)
    if not (isinstance(k, int) and not isinstance(k, bool) and k >= 0):
        problems.append(f"alignment_biases.{name}.window must be a non-negative integer, got {k!r}")
    form = options.get("form", DEFAULT_FORM)
    if form not in FORMS:
        problems.append(f"alignment_biases.{name}.form must be one of {', '.join(FORMS)}, got {form!r}")
    return problems


def window_band(weight: torch.Tensor, source_len: int) -> torch.Tensor:
    """The window weights as a band matrix: weight (H, 2k+1), columns = offsets -k..k ->
    band (H, S, S) fp32 with band[h, j, i] = w[h, j-i+k] where |j-i| <= k, else 0."""
    k = (weight.shape[1] - 1) // 2
    index = torch.arange(source_len, device=weight.device)
    offset = index.view(-1, 1) - index.view(1, -1)  # (S, S): j - i
    inside = offset.abs() <= k  # (S, S)
    picked = weight.float()[:, (offset + k).clamp(0, 2 * k)]  # (H, S, S)
    return picked * inside.to(picked.dtype)  # (H, S, S)


def banded_sum(signal: torch.Tensor, band: torch.Tensor) -> torch.Tensor:
    """signal (B, H, T, S) @ band (H, S, S) -> (B, H, T, S) in the band's dtype (fp32 from `window_band`):
    row i is Σ_j signal[j] · band[j, i]."""
    # One matmul per term, not one product per offset: in the recurrent form this runs once per
    # target step. autocast is off so that it stays fp32 (autocast would run matmul in bf16).
    with torch.autocast(device_type=signal.device.type, enabled=False):
        return torch.matmul(signal.to(band.dtype), band.unsqueeze(0))  # (B, H, T, S)


def windowed_bias(signal: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Σ_o w[h, o] · ξ_k(signal; i)[o] (Cohn et al. §3.2, ξ₁ of the previous step's attention; §3.3,
    ξ₂ of the attention summed over earlier steps), zero outside [0, S).

    signal (B, H, T, S) fp32, weight (H, 2k+1) -> (B, H, T, S) fp32; the same sum as
    Σ_o w[h, o] · `model.biases.features.window`(signal, k)[..., o], as a band matrix product.
    """
    return banded_sum(signal, window_band(weight, signal.shape[-1]))


class WindowBias(nn.Module):
    """Base of `markov` and `fertility`: subclasses set `name` and `reads`."""

    name = ""
    reads = ""

    def __init__(self, n_heads: int, options: dict[str, Any]):
        super().__init__()
        self.window = int(options.get("window", DEFAULT_WINDOW))
        self.form = str(options.get("form", DEFAULT_FORM))
        self.weight = nn.Parameter(torch.zeros(n_heads, 2 * self.window + 1))  # (H, 2k+1): offsets -k..k

    @classmethod
    def validate_options(cls, options: dict[str, Any]) -> list[str]:
        return validate_window_options(cls.name, options)

    def forward(self, history: History, lengths: torch.Tensor, source_len: int) -> torch.Tensor:
        signal = getattr(history, self.reads)
        return windowed_bias(signal, self.weight)
