"""The pure attention math (model/attention/functional.py) against values written out by hand."""
from __future__ import annotations

import math

import torch

from model.attention.functional import (attention_mask, dropout, masked_softmax, merge_heads, scaled_dot_product_probs,
                                        split_heads)
from tests.helpers import HAND_FORMULA_OPS, assert_close_for


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
    assert_close_for(scaled_dot_product_probs(q, k, None)[0, 0, 0], torch.tensor(expected), ops=HAND_FORMULA_OPS)
    # An explicit scale replaces 1/sqrt(dh).
    logits = [2.0 * 0.1, 0.0, 4.0 * 0.1]
    expected = [math.exp(v) / sum(math.exp(u) for u in logits) for v in logits]
    assert_close_for(scaled_dot_product_probs(q, k, None, 0.1)[0, 0, 0], torch.tensor(expected), ops=HAND_FORMULA_OPS)


def test_masked_keys_get_zero_and_a_fully_masked_query_gets_zeros_not_nan():
    q = torch.ones(1, 1, 2, 2)
    k = torch.tensor([[[[1.0, 0.0], [0.0, 3.0]]]])
    mask = torch.tensor([[[[True, False], [False, False]]]])
    probs = scaled_dot_product_probs(q, k, mask)
    assert probs.tolist() == [[[[1.0, 0.0], [0.0, 0.0]]]]


def _softmax(values):
    exps = [math.exp(v) for v in values]
    return [e / sum(exps) for e in exps]


def test_masked_softmax_hides_the_true_entries_and_computes_in_float32():
    # (1, 2, 3): the softmax runs over the last axis, not over the rows.
    scores = torch.tensor([[[1.0, 5.0, 2.0], [0.5, 0.0, -1.0]]], dtype=torch.float16)
    hidden = torch.tensor([[[False, True, False], [False, False, False]]])
    probs = masked_softmax(scores, hidden)
    assert probs.dtype == torch.float32
    a, c = _softmax([1.0, 2.0])
    assert_close_for(probs[0, 0], torch.tensor([a, 0.0, c]), ops=HAND_FORMULA_OPS)
    assert_close_for(probs[0, 1], torch.tensor(_softmax([0.5, 0.0, -1.0])), ops=HAND_FORMULA_OPS)
    # No mask: the plain softmax, in float32 too.
    plain = masked_softmax(scores, None)
    assert plain.dtype == torch.float32
    assert_close_for(plain[0, 0], torch.tensor(_softmax([1.0, 5.0, 2.0])), ops=HAND_FORMULA_OPS)
    # The mask broadcasts: one row of it hides the same entry in every row of scores.
    a, c = _softmax([0.5, -1.0])
    assert_close_for(masked_softmax(scores, hidden[:, :1])[0, 1], torch.tensor([a, 0.0, c]), ops=HAND_FORMULA_OPS)


def test_masked_softmax_gives_an_all_hidden_row_zeros_and_a_finite_gradient_when_told_it_may_be_empty():
    scores = torch.tensor([[[1.0, 2.0, 0.0], [3.0, 4.0, 1.0]]], requires_grad=True)  # (1, 2, 3)
    hidden = torch.tensor([[[True, True, True], [True, False, False]]])
    probs = masked_softmax(scores, hidden, may_be_empty=True)
    b, c = _softmax([4.0, 1.0])
    assert_close_for(probs, torch.tensor([[[0.0, 0.0, 0.0], [0.0, b, c]]]), ops=HAND_FORMULA_OPS)
    probs[0, 0].sum().backward()
    assert torch.isfinite(scores.grad).all()
    assert scores.grad.abs().sum() == 0  # the empty row is a constant 0
    # Without the promise no row is checked: an all-hidden row is the softmax of -inf, NaN.
    assert torch.isnan(masked_softmax(scores.detach(), hidden)[0, 0]).all()


def test_dropout_is_the_identity_unless_training_with_p_above_zero():
    x = torch.ones(1000)
    assert dropout(x, 0.5, False) is x
    assert dropout(x, 0.0, True) is x
    torch.manual_seed(0)
    dropped = dropout(x, 0.5, True)
    # Inverted dropout: every kept value is scaled by 1/(1-p) = 2.
    assert set(dropped.unique().tolist()) == {0.0, 2.0}
    assert 400 < int(dropped.eq(0).sum()) < 600
