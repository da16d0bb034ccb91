"""The recurrent form of the Markov and fertility biases in a full pass (Cohn et al. §3.2–§3.3).

The paper conditions step t's attention on the attention the model actually USED at earlier steps
(ξ₁ reads α_{t-1}, ξ₂ reads Σ_{t'<t} α_{t'}, each α itself biased), so the biased probabilities of
one layer are a recurrence over target positions:

    α_t = softmax(ℓ_t + bias(history(α_0 .. α_{t-1}), t))

The content logits ℓ of every step are computed at once (they depend on the layer's input only);
the softmax with its bias runs step by step, carrying the same state as incremental decoding
(`model.biases.history`: initial_state, step_history, next_state), so a full pass and a decode
give the same numbers by construction. Gradients flow through the carried rows (back-propagation
through the target steps, as in the paper's RNN).
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from model.attention.functional import masked_softmax
from model.biases.history import History, State, initial_state, next_state, step_history
from model.biases.window_bias import banded_sum

# (logits (B, H, 1, S) fp32, history of one step, the step t) -> biased probabilities (B, H, 1, S)
BiasedStep = Callable[[torch.Tensor, History, int], torch.Tensor]


def recurrent_probs(logits: torch.Tensor, signals: frozenset[str], biased_step: BiasedStep) -> torch.Tensor:
    """logits (B, H, T, S) fp32 -> the biased probabilities (B, H, T, S), step t's bias read from the
    biased rows 0..t-1 (Cohn et al. §3.2, ξ₁(α_{t-1}); §3.3, ξ₂(Σ_{t'<t} α_{t'}))."""
    b, h, t_len, s = logits.shape
    state: State = initial_state(signals, b, h, s, logits.device)
    rows = []
    for t in range(t_len):
        probs = biased_step(logits[:, :, t : t + 1], step_history(state, signals), t)  # (B, H, 1, S)
        rows.append(probs)
        state = next_state(state, probs, signals)
    if not rows:
        return logits.new_zeros(logits.shape)
    return torch.cat(rows, dim=2)  # (B, H, T, S)


def window_probs(logits: torch.Tensor, hidden: torch.Tensor | None, windows: Sequence[tuple[str, torch.Tensor]],
                 static: torch.Tensor | None = None) -> torch.Tensor:
    """The recurrence with window terms (Markov, local fertility): logits (B, H, T, S) fp32 -> the
    biased probabilities (B, H, T, S). windows: per term the signal it reads ("previous",
    "coverage") and its weights as a band matrix (H, S, S) (`window_band`), summed in this order;
    static (B, H, T, S) | None: the terms that read no attention (position), added after them;
    hidden (B|1, 1, 1, S) True at padding."""

    def biased_step(row: torch.Tensor, history: History, t: int) -> torch.Tensor:
        total = None
        for reads, band in windows:
            value = banded_sum(getattr(history, reads), band)  # (B, H, 1, S)
            total = value if total is None else total + value
        if static is not None:
            total = total + static[:, :, t : t + 1]
        return masked_softmax(row + total, hidden, may_be_empty=True)

    return recurrent_probs(logits, frozenset(reads for reads, _ in windows), biased_step)
