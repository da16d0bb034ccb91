"""The pure attention math (model/attention/functional.py) against values written out by hand."""
from __future__ import annotations

import math

import torch

from model.attention.functional import attention_mask, dropout, merge_heads, scaled_dot_product_probs, split_heads


def test_split_heads_puts_consecutive_channels_in_one_head_and_merge_undoes_it():
    x = torch.arange(2 * 3 * 6, dtype=torch.float32).view(2, 3, 6)  # (B, T, D), D = 2 heads x 3
    heads = split_heads(x, 2)
    assert heads.shape == (2, 2, 3, 3)
    assert heads[1, 0, 2].tolist() == x[1, 2, 0:3].tolist()
    assert heads[1, 1, 2].tolist() == x[1, 2, 3:6].tolist()
    assert torch.equal(merge_heads(heads), x)


def test_a_causal_mask_lets_each_of_the_last_queries_see_its_past():
    mask = attention_mask(None, 2, 4, True, torch.device("cpu"))
    # Queries are positions 2 and 3 of 4 keys.
    assert mask.tolist() == [[[[True, True, True, False], [True, True, True, True]]]]
    assert attention_mask(None, 3, 3, False, torch.device("cpu")) is None


def test_padding_and_causality_combine():
    pad = torch.tensor([[False, False, True], [False, False, False]])
    mask = attention_mask(pad, 3, 3, True, torch.device("cpu"))
    assert mask.shape == (2, 1, 3, 3)
    assert mask[0, 0].tolist() == [[True, False, False], [True, True, False], [True, True, False]]
    assert mask[1, 0].tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    only_pad = attention_mask(pad, 1, 3, False, torch.device("cpu"))
    assert only_pad.tolist() == [[[[True, True, False]]], [[[True, True, True]]]]


def test_probabilities_are_the_softmax_of_scaled_dot_products():
    q = torch.tensor([[[[1.0, 0.0, 0.0, 0.0]]]])  # (1, 1, 1, 4): dh = 4, scale 1/2
    k = torch.tensor([[[[2.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [4.0, 0.0, 0.0, 0.0]]]])
    logits = [2.0 / 2, 0.0, 4.0 / 2]
    expected = [math.exp(v) / sum(math.exp(u) for u in logits) for v in logits]
    torch.testing.assert_close(scaled_dot_product_probs(q, k, None)[0, 0, 0], torch.tensor(expected), atol=1e-7, rtol=0)
    # An explicit scale replaces 1/sqrt(dh).
    logits = [2.0 * 0.1, 0.0, 4.0 * 0.1]
    expected = [math.exp(v) / sum(math.exp(u) for u in logits) for v in logits]
    torch.testing.assert_close(scaled_dot_product_probs(q, k, None, 0.1)[0, 0, 0], torch.tensor(expected), atol=1e-7, rtol=0)


def test_masked_keys_get_zero_and_a_fully_masked_query_gets_zeros_not_nan():
    q = torch.ones(1, 1, 2, 2)
    k = torch.tensor([[[[1.0, 0.0], [0.0, 3.0]]]])
    mask = torch.tensor([[[[True, False], [False, False]]]])
    probs = scaled_dot_product_probs(q, k, mask)
    assert probs.tolist() == [[[[1.0, 0.0], [0.0, 0.0]]]]


def test_dropout_is_the_identity_unless_training_with_p_above_zero():
    x = torch.ones(1000)
    assert dropout(x, 0.5, False) is x
    assert dropout(x, 0.0, True) is x
    torch.manual_seed(0)
    dropped = dropout(x, 0.5, True)
    # Inverted dropout: every kept value is scaled by 1/(1-p) = 2.
    assert set(dropped.unique().tolist()) == {0.0, 2.0}
    assert 400 < int(dropped.eq(0).sum()) < 600
