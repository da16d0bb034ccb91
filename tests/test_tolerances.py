"""tests/helpers.py's float tolerance: ops * eps(dtype) * magnitude, and nothing looser."""
from __future__ import annotations

import pytest
import torch

from tests.helpers import assert_close_for, tolerance_for

EPS32 = 2.0 ** -23  # torch.finfo(torch.float32).eps


def test_the_tolerance_is_ops_units_of_eps_at_the_magnitude():
    assert tolerance_for(64, 4.0) == 64 * EPS32 * 4.0
    assert tolerance_for(8, 0.25) == 8 * EPS32  # magnitudes below 1 count as 1
    assert tolerance_for(3, 2.0, torch.float64) == 3 * 2.0 ** -52 * 2.0
    assert tolerance_for(0, 5.0) == 0.0  # no reordered rounding: bitwise


def test_a_difference_within_the_bound_passes_and_one_beyond_fails():
    expected = torch.tensor([4.0, -2.0, 0.5])
    bound = tolerance_for(16, 4.0)  # magnitude: the largest |expected|
    assert_close_for(expected + torch.tensor([0.0, 0.0, bound * 0.9]).float(), expected, ops=16)
    with pytest.raises(AssertionError):
        assert_close_for(expected + torch.tensor([0.0, 0.0, bound * 1.5]).float(), expected, ops=16)
    with pytest.raises(AssertionError):
        assert_close_for(torch.nextafter(torch.tensor(1.0), torch.tensor(2.0)), 1.0, ops=0)


def test_infinities_match_exactly_and_do_not_widen_the_tolerance():
    expected = torch.tensor([float("-inf"), -3.0])
    assert_close_for(expected.clone(), expected, ops=1)
    with pytest.raises(AssertionError):
        assert_close_for(torch.tensor([-1e30, -3.0]), expected, ops=1)
    with pytest.raises(AssertionError):  # the magnitude is 3 (the finite part), not inf
        assert_close_for(torch.tensor([float("-inf"), -2.9]), expected, ops=64)


def test_python_numbers_are_compared_at_the_precision_that_made_them():
    assert_close_for(1.0 + 4 * EPS32, 1.0, ops=4)  # a float32 result read out as a double
    with pytest.raises(AssertionError):
        assert_close_for(1.0 + 4 * EPS32, 1.0, ops=4, dtype=torch.float64)
    assert_close_for([0.5, 0.25], [0.5, 0.25], ops=0)
