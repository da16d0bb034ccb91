"""Inverse square-root schedule with linear warm-up."""
import math

import pytest
import torch

from training.schedule import inverse_sqrt_factor, inverse_sqrt_schedule


def test_factor_values():
    assert inverse_sqrt_factor(1, 4) == 0.25
    assert inverse_sqrt_factor(2, 4) == 0.5
    assert inverse_sqrt_factor(4, 4) == 1.0
    assert inverse_sqrt_factor(16, 4) == 0.5
    assert inverse_sqrt_factor(64, 4) == 0.25
    with pytest.raises(ValueError, match=r"^warmup must be >= 1, got 0$"):
        inverse_sqrt_factor(1, 0)


def test_scheduler_sets_the_lr_each_update_uses():
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.Adam([param], lr=0.005)
    scheduler = inverse_sqrt_schedule(optimizer, warmup=2000)
    seen = {}
    for update in range(1, 8001):
        seen[update] = optimizer.param_groups[0]["lr"]  # the lr this update runs with
        optimizer.step()
        scheduler.step()
    assert math.isclose(seen[1], 0.005 / 2000)
    assert math.isclose(seen[1000], 0.0025)
    assert math.isclose(seen[2000], 0.005)  # peak at the end of warm-up
    assert math.isclose(seen[8000], 0.0025)
    assert math.isclose(seen[4500], 0.005 * math.sqrt(2000 / 4500))
    assert max(seen.values()) == seen[2000]


def test_scheduler_state_round_trips():
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.Adam([param], lr=1.0)
    scheduler = inverse_sqrt_schedule(optimizer, warmup=10)
    for _ in range(7):
        optimizer.step()
        scheduler.step()
    state = scheduler.state_dict()
    optimizer2 = torch.optim.Adam([param], lr=1.0)
    scheduler2 = inverse_sqrt_schedule(optimizer2, warmup=10)
    scheduler2.load_state_dict(state)
    optimizer2.step()
    scheduler2.step()
    assert math.isclose(optimizer2.param_groups[0]["lr"], 0.9)
