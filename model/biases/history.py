"""What the bias terms read about earlier target steps, computed two ways that must agree.

`History` holds the signals a bias term may read (each bias names one in `reads`):
- "previous": α_{t-1}, the attention of the previous target step (B, H, T, S),
- "coverage": Σ_{t'<t} α_{t'}, the attention summed over all earlier steps (B, H, T, S),
- "position": the target step t of each query row (B|1, T), int64.
α is the biased attention the layer used in the "recurrent" form (the paper's), its unbiased
attention in the "parallel" form (`model.biases.window_bias`).

Parallel form, full pass (training): the signals come from the whole unbiased α at once, a shift
and a cumsum (`full_history`). Recurrent form, full pass: the state below is carried step by
step over the target (`model.biases.recurrence`). Incremental decoding, both forms: the signals
come from the decoding state of the previous step, and the step returns the next state. The state keys live in the cross-attention's own state dict, so they
reorder with the beam (index_select on dim 0) and become exported graph inputs unchanged:
"prev_attention" (N, H, S) fp32, "coverage" (N, H, S) fp32, "step" (N,) int64.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from model.biases.features import coverage, previous_step

SIGNALS = ("previous", "coverage", "position")
STATE_KEYS = {"previous": "prev_attention", "coverage": "coverage", "position": "step"}

State = dict[str, torch.Tensor]


@dataclass(frozen=True)
class History:
    previous: torch.Tensor | None = None  # (B, H, T, S) fp32
    coverage: torch.Tensor | None = None  # (B, H, T, S) fp32
    position: torch.Tensor | None = None  # (B|1, T) int64


def full_history(unbiased: torch.Tensor, signals: frozenset[str]) -> History:
    """The signals for every target row of a full pass, from the unbiased α (B, H, T, S) fp32."""
    return History(
        previous=previous_step(unbiased) if "previous" in signals else None,
        coverage=coverage(unbiased) if "coverage" in signals else None,
        position=torch.arange(unbiased.shape[2], device=unbiased.device).unsqueeze(0) if "position" in signals else None,  # (1, T)
    )


def initial_state(signals: frozenset[str], batch_size: int, n_heads: int, source_len: int, device: torch.device) -> State:
    """Before the first step nothing was attended: zeros, and step 0."""
    state: State = {}
    if "previous" in signals:
        state["prev_attention"] = torch.zeros(batch_size, n_heads, source_len, device=device)  # (N, H, S)
    if "coverage" in signals:
        state["coverage"] = torch.zeros(batch_size, n_heads, source_len, device=device)  # (N, H, S)
    if "position" in signals:
        state["step"] = torch.zeros(batch_size, dtype=torch.long, device=device)  # (N,)
    return state


def step_history(state: State, signals: frozenset[str]) -> History:
    """The signals for one step (T = 1) from the state the previous step left."""
    return History(
        previous=state["prev_attention"].unsqueeze(2) if "previous" in signals else None,  # (N, H, 1, S)
        coverage=state["coverage"].unsqueeze(2) if "coverage" in signals else None,  # (N, H, 1, S)
        position=state["step"].unsqueeze(1) if "position" in signals else None,  # (N, 1)
    )


def next_state(state: State, attended: torch.Tensor, signals: frozenset[str]) -> State:
    """The state after a step whose α is `attended` (N, H, 1, S) fp32: the biased probabilities in the
    recurrent form, the unbiased ones in the parallel form."""
    probs = attended.squeeze(2)  # (N, H, S)
    new: State = {}
    if "previous" in signals:
        new["prev_attention"] = probs
    if "coverage" in signals:
        new["coverage"] = state["coverage"] + probs
    if "position" in signals:
        new["step"] = state["step"] + 1
    return new
