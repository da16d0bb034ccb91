"""Attentive source-phrase representations, the pure parts: fixed chunking by hand, attentive pooling,
the plain pooling of the ablation, the attentive combination (eq. 8) and the transparent mix against
hand computations, the chunk phrase table, the options' messages."""
import math

import pytest
import torch

from model.config import ModelConfig
from model.errors import ConfigError
from model.phrase_representation.functional import (
    attentive_combination,
    attentive_pool,
    chunk_phrase_table,
    fixed_chunks,
    plain_pool,
    tokens_per_chunk,
    transparent_mix,
    transparent_weights,
)
from tests.helpers import chunk_spans
from tests.helpers import HAND_FORMULA_OPS, TINY_MODEL_OPS, assert_close_for


def pad_mask(lengths, width):
    return torch.arange(width).unsqueeze(0) >= torch.tensor(lengths).unsqueeze(1)  # (B, S) True at padding


def spans(lengths, width=None):
    return chunk_spans(fixed_chunks(pad_mask(lengths, width or max(lengths))))


def test_tokens_per_chunk_is_max_min_8_ceil_l_over_6_and_3():
    lengths = torch.tensor([0, 1, 3, 6, 18, 19, 24, 25, 36, 37, 42, 43, 48, 49, 60, 200])
    assert tokens_per_chunk(lengths).tolist() == [3, 3, 3, 3, 3, 4, 4, 5, 6, 7, 7, 8, 8, 8, 8, 8]


def test_one_token_is_one_chunk_of_one():
    assert spans([1]) == [[(0, 1)]]
    assert fixed_chunks(pad_mask([1], 4)).tolist() == [[1, 0, 0, 0]]


def test_length_equal_to_ntok_is_one_full_chunk():
    assert spans([3]) == [[(0, 3)]]


def test_length_ntok_plus_one_leaves_a_one_token_chunk():
    assert spans([4]) == [[(0, 3), (3, 4)]]
    # The widths change with L too: 19 is the shortest length cut in fours (the last chunk short).
    assert spans([19]) == [[(0, 4), (4, 8), (8, 12), (12, 16), (16, 19)]]


def test_sixty_tokens_are_cut_in_eights():
    assert spans([60]) == [[(0, 8), (8, 16), (16, 24), (24, 32), (32, 40), (40, 48), (48, 56), (56, 60)]]
    assert spans([48]) == [[(0, 8), (8, 16), (16, 24), (24, 32), (32, 40), (40, 48)]]


def test_every_row_has_its_own_length_and_width_in_one_batch():
    lengths = [1, 3, 4, 7, 19, 25, 60, 0]
    chunks = fixed_chunks(pad_mask(lengths, 60))  # (8, 60): one call, no loop over rows
    assert chunk_spans(chunks) == [
        [(0, 1)],
        [(0, 3)],
        [(0, 3), (3, 4)],
        [(0, 3), (3, 6), (6, 7)],
        [(0, 4), (4, 8), (8, 12), (12, 16), (16, 19)],
        [(0, 5), (5, 10), (10, 15), (15, 20), (20, 25)],
        [(0, 8), (8, 16), (16, 24), (24, 32), (32, 40), (40, 48), (48, 56), (56, 60)],
        [],
    ]
    # The chunks cover each row's real tokens exactly once, and nothing on padding.
    assert chunks.sum(dim=1).tolist() == lengths


def test_padding_does_not_move_the_chunks():
    alone = fixed_chunks(pad_mask([7], 7))
    padded = fixed_chunks(pad_mask([7, 12], 12))
    assert torch.equal(padded[0, :7], alone[0]) and padded[0, 7:].abs().sum() == 0


def _sigmoid(v):
    return 1.0 / (1.0 + math.exp(-v))


def _hand_pool(x, chunk, glance):
    """Eq. 1-4 with W₁ = [I | I], b₁ = (0.1, -0.2), W₂ = (1, 2), in plain Python."""
    rows = [x[k] for k in chunk]
    if glance == "mean":
        g = [sum(r[d] for r in rows) / len(rows) for d in range(2)]
    else:
        g = [max(r[d] for r in rows) for d in range(2)]
    scores = [_sigmoid(r[0] + g[0] + 0.1) + 2 * _sigmoid(r[1] + g[1] - 0.2) for r in rows]
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    weights = [w / sum(weights) for w in weights]
    return [sum(w * r[d] for w, r in zip(weights, rows)) for d in range(2)], weights


@pytest.mark.parametrize("glance", ["mean", "max"])
def test_attentive_pooling_equals_a_hand_computation(glance):
    x = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, -1.0], [9.0, 9.0]]  # the last row is padding
    xt = torch.tensor([x])
    chunks = fixed_chunks(pad_mask([4], 5))  # [(0, 3), (3, 4)]
    phrases, alpha = attentive_pool(
        xt, chunks, glance, torch.eye(2), torch.eye(2), torch.tensor([0.1, -0.2]), torch.tensor([[1.0, 2.0]])
    )
    first, first_weights = _hand_pool(x, [0, 1, 2], glance)
    expected = torch.tensor([[first, [0, 0], [0, 0], [2.0, -1.0], [0, 0]]])
    assert_close_for(phrases, expected, ops=TINY_MODEL_OPS)
    assert_close_for(alpha[0, 0, :3], torch.tensor(first_weights), ops=TINY_MODEL_OPS)
    assert alpha[0, 3].tolist() == [1.0] + [0.0] * 7  # a one-token chunk is that token
    assert alpha[0, [1, 2, 4]].abs().sum() == 0  # no chunk starts there


@pytest.mark.parametrize("glance", ["mean", "max"])
def test_all_padding_chunk_slots_give_no_nan_forward_or_backward(glance):
    torch.manual_seed(0)
    x = torch.randn(3, 9, 4, requires_grad=True)
    chunks = fixed_chunks(pad_mask([9, 2, 1], 9))  # rows 1 and 2: every slot after the first is empty
    weights = [torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True),
               torch.randn(4, requires_grad=True), torch.randn(1, 4, requires_grad=True)]
    phrases, alpha = attentive_pool(x, chunks, glance, *weights)
    assert torch.isfinite(phrases).all() and torch.isfinite(alpha).all()
    assert phrases[1, 1:].abs().sum() == 0 and phrases[2, 1:].abs().sum() == 0
    (phrases.square().sum() + alpha.sum()).backward()
    for t in [x, *weights]:
        assert torch.isfinite(t.grad).all()
    # Padding positions receive no gradient: they are in no chunk.
    assert x.grad[1, 2:].abs().sum() == 0 and x.grad[2, 1:].abs().sum() == 0


def test_pooling_weights_sum_to_one_on_every_chunk_and_zero_elsewhere():
    torch.manual_seed(1)
    chunks = fixed_chunks(pad_mask([60, 13, 5], 60))
    _, alpha = attentive_pool(torch.randn(3, 60, 4), chunks, "mean", torch.randn(4, 4), torch.randn(4, 4),
                              torch.randn(4), torch.randn(1, 4))
    assert_close_for(alpha.sum(-1), chunks.gt(0).float(), ops=TINY_MODEL_OPS)


def test_transparent_mix_weights_sum_to_one_and_equal_the_hand_value():
    logits = torch.tensor([0.0, math.log(2.0), math.log(3.0)])
    weights = transparent_weights(logits)
    assert_close_for(weights, torch.tensor([1 / 6, 2 / 6, 3 / 6]), ops=HAND_FORMULA_OPS)
    assert_close_for(weights.sum(), 1.0, ops=HAND_FORMULA_OPS)
    phrases = torch.stack([torch.full((1, 2, 3), 6.0), torch.full((1, 2, 3), 12.0), torch.full((1, 2, 3), -6.0)], 1)
    # 6/6 + 12·2/6 - 6·3/6 = 1 + 4 - 3
    assert_close_for(transparent_mix(phrases, logits), torch.full((1, 2, 3), 2.0), ops=TINY_MODEL_OPS)


def test_chunk_table_puts_each_chunk_weight_at_its_length_and_start():
    chunks = fixed_chunks(pad_mask([4, 2], 4))  # row 0: (0, 3), (3, 4); row 1: (0, 2)
    probs = torch.tensor([[0.25, 0.0, 0.0, 0.75], [1.0, 0.0, 0.0, 0.0]])  # (B, S) over chunk starts
    table = chunk_phrase_table(probs, chunks)  # (B, 8, S)
    expected = torch.zeros(2, 8, 4)
    expected[0, 2, 0], expected[0, 0, 3], expected[1, 1, 0] = 0.25, 0.75, 1.0
    assert torch.equal(table, expected)


def config_problems(value):
    with pytest.raises(ConfigError) as caught:
        ModelConfig.from_dict({"vocab_size": 100, "d_model": 32, "n_heads": 4, "phrase_representation": value})
    return caught.value.problems


def test_options_report_every_problem_at_once():
    assert config_problems({"glance": "median", "window": 4, "chunk": 2, "pooling": "sum", "activation": "tanh",
                            "decoder_combination": "gated", "transparent": "yes"}) == [
        "phrase_representation: unknown option(s) ['chunk', 'window']; known options: "
        "activation, decoder_combination, glance, pooling, transparent",
        "phrase_representation: pooling must be one of attentive, mean, max, got 'sum'",
        "phrase_representation: glance must be one of max, mean, got 'median'",
        "phrase_representation: activation must be one of sigmoid, relu, got 'tanh'",
        "phrase_representation: decoder_combination must be one of attentive, residual, got 'gated'",
        "phrase_representation: transparent must be true or false, got 'yes'",
    ]
    assert config_problems({"glance": 1}) == ["phrase_representation: glance must be one of max, mean, got 1"]
    assert config_problems({"pooling": "mean", "glance": "max"}) == [
        "phrase_representation: glance applies only to pooling 'attentive', not 'mean'"
    ]
    assert config_problems(["mean"]) == ["phrase_representation must be an object or null, got list"]


def test_valid_options_round_trip():
    for options in ({}, {"glance": "mean"}, {"glance": "max"}, {"pooling": "max"}, {"pooling": "mean"},
                    {"activation": "relu", "decoder_combination": "residual", "transparent": False},
                    {"pooling": "attentive", "glance": "max", "activation": "sigmoid",
                     "decoder_combination": "attentive", "transparent": True}):
        config = ModelConfig(vocab_size=100, d_model=32, n_heads=4, phrase_representation=options)
        assert ModelConfig.from_dict(config.to_dict()) == config


def test_the_defaults_are_the_papers_best_system():
    from model.phrase_representation.options import phrase_options

    assert phrase_options({}) == {"pooling": "attentive", "glance": "max", "activation": "sigmoid",
                                  "decoder_combination": "attentive", "transparent": True}


@pytest.mark.parametrize("kind", ["mean", "max"])
def test_plain_pooling_is_the_mean_or_max_of_each_chunk(kind):
    x = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [4.0, -2.0], [2.0, -1.0], [9.0, 9.0]]])  # the last row is padding
    chunks = fixed_chunks(pad_mask([4], 5))  # [(0, 3), (3, 4)]
    first = [5 / 3, -1 / 3] if kind == "mean" else [4.0, 1.0]
    expected = torch.tensor([[first, [0, 0], [0, 0], [2.0, -1.0], [0, 0]]])
    assert_close_for(plain_pool(x, chunks, kind), expected, ops=TINY_MODEL_OPS)


@pytest.mark.parametrize("activation", ["sigmoid", "relu"])
def test_attentive_combination_equals_eq_8_by_hand(activation):
    """W₄σ(W₃[x | c] + b₃) + b₄ with D = 1, F = 2: W₃ = [[1, 2], [-1, 1]], b₃ = (0.5, -1),
    W₄ = [[2, -3]], b₄ = 0.25, x = 0.5, c = -1: W₃[x | c] + b₃ = (0.5 - 2 + 0.5, -0.5 - 1 - 1) = (-1, -2.5)."""
    sigma = _sigmoid if activation == "sigmoid" else (lambda v: max(v, 0.0))
    expected = 2 * sigma(-1.0) - 3 * sigma(-2.5) + 0.25
    update = attentive_combination(
        torch.tensor([[0.5]]), torch.tensor([[-1.0]]), torch.tensor([[1.0, 2.0], [-1.0, 1.0]]),
        torch.tensor([0.5, -1.0]), torch.tensor([[2.0, -3.0]]), torch.tensor([0.25]), activation,
    )
    assert_close_for(update, expected, ops=HAND_FORMULA_OPS)
    if activation == "sigmoid":
        assert abs(expected - (2 / (1 + math.e) - 3 / (1 + math.exp(2.5)) + 0.25)) < 1e-12
    else:
        assert expected == 0.25  # both hidden units are negative: ReLU zeroes them, only b₄ is left
