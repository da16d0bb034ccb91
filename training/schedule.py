"""Inverse square-root learning-rate schedule with linear warm-up (Vaswani et al., 2017, eq. 3)."""
from __future__ import annotations

import math

import torch


def inverse_sqrt_factor(update: int, warmup: int) -> float:
    """Multiplier of the peak lr for the `update`-th optimizer step (1-based).

    update / warmup while warming up, sqrt(warmup / update) after: exactly 1 at update == warmup.
    """
    if warmup < 1:
        raise ValueError(f"warmup must be >= 1, got {warmup}")
    update = max(update, 1)
    return min(update / warmup, math.sqrt(warmup / update))


class InverseSqrt:
    """LambdaLR lambda. LambdaLR calls it with the number of scheduler steps taken so far, k, and the
    lr it sets is the one the next update, number k + 1, uses."""

    def __init__(self, warmup: int):
        if warmup < 1:
            raise ValueError(f"warmup must be >= 1, got {warmup}")
        self.warmup = warmup

    def __call__(self, steps_done: int) -> float:
        return inverse_sqrt_factor(steps_done + 1, self.warmup)


def inverse_sqrt_schedule(optimizer: torch.optim.Optimizer, warmup: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Call `scheduler.step()` once after every `optimizer.step()`; peak lr = the optimizer's lr."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, InverseSqrt(warmup))
