"""The blocked candidate topk of beam search equals the literal one (model/decoding/top_candidates.py)."""
from __future__ import annotations

import pytest
import torch

from model.decoding.top_candidates import block_size, top_candidates


def literal(scores, log_probs, count):
    n, K = scores.shape
    return (scores.unsqueeze(2) + log_probs.view(n, K, -1)).view(n, -1).topk(count, dim=1)


@pytest.mark.parametrize(("vocab", "block"), [(10000, 100), (4096, 64), (2048, 32), (32000, 160),
                                              (2047, None), (4099, None), (100, None)])
def test_block_size_is_the_divisor_nearest_the_square_root(vocab, block):
    assert block_size(vocab) == block


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("beams", [1, 4, 5])
def test_blocked_equals_literal_on_random_log_probs(beams, dtype):
    gen = torch.Generator().manual_seed(beams)
    n, V = 6, 4096
    log_probs = torch.log_softmax(3 * torch.randn(n * beams, V, generator=gen, dtype=dtype), dim=1)
    scores = -5 * torch.rand(n, beams, generator=gen, dtype=dtype)
    count = 2 * beams
    values, index = top_candidates(scores, log_probs, count, blocked=True)
    expected_values, expected_index = literal(scores, log_probs, count)
    assert torch.equal(values, expected_values)  # the same float sums, not merely close
    assert torch.equal(index, expected_index)  # random floats have no ties


def test_the_winners_may_crowd_into_one_block_and_one_beam():
    # Beam 1's block 3 holds every winner: only the bounds of that block may bring them in.
    n, K, V = 1, 3, 4096
    log_probs = torch.full((n * K, V), -20.0)
    log_probs[1, 3 * 64 : 3 * 64 + 10] = torch.arange(10, dtype=torch.float32).neg()
    scores = torch.tensor([[0.0, -1.0, -0.5]])
    values, index = top_candidates(scores, log_probs, 6, blocked=True)
    assert index.tolist() == [[V + 192, V + 193, V + 194, V + 195, V + 196, V + 197]]
    assert values.tolist() == [[-1.0, -2.0, -3.0, -4.0, -5.0, -6.0]]


def test_dead_beams_and_masked_tokens_stay_minus_infinity():
    # The first step: only beam 0 is live; the second sentence may only end (EOS = 2).
    gen = torch.Generator().manual_seed(7)
    n, K, V = 2, 4, 2048
    log_probs = torch.log_softmax(torch.randn(n * K, V, generator=gen), dim=1)
    log_probs[K:, :2] = float("-inf")
    log_probs[K:, 3:] = float("-inf")
    scores = torch.tensor([[0.0] + [float("-inf")] * (K - 1), [-1.0, -2.0, -3.0, -4.0]])
    values, index = top_candidates(scores, log_probs, 2 * K, blocked=True)
    expected_values, expected_index = literal(scores, log_probs, 2 * K)
    assert torch.equal(values, expected_values)
    assert torch.equal(index[0], expected_index[0])
    assert index[1, :K].tolist() == [2, V + 2, 2 * V + 2, 3 * V + 2]  # each beam's EOS, best beam first
    assert values[1, K:].tolist() == [float("-inf")] * K


def test_a_small_vocabulary_takes_the_literal_form():
    scores = torch.tensor([[0.0, -1.0]])
    log_probs = torch.log_softmax(torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]]), dim=1)
    values, index = top_candidates(scores, log_probs, 4, blocked=True)
    expected_values, expected_index = literal(scores, log_probs, 4)
    assert torch.equal(values, expected_values) and torch.equal(index, expected_index)
