"""The added alignment head that reads the whole target (model/supervised_alignment.py:
"self_attention", "diagonal", "heads"): its options, its math on constructed cases, the rows of a
finished hypothesis from one forced pass (model/decoding/finished_alignment.py) equal to the full pass, and
no step-wise rows."""
from __future__ import annotations

import math

import pytest
import torch

from model.config import ModelConfig
from model.errors import ConfigError
from model.decoding.generate import generate
from model.decoding.options import DecodingOptions
from model.supervised_alignment import diagonal_distance, full_self_attention, head_averaged_attention
from model.transformer import Transformer
from tests.helpers import tiny_config
from tests.helpers import HAND_FORMULA_OPS, TINY_MODEL_OPS, assert_close_for

pytestmark = pytest.mark.usefixtures("one_thread")

FULL = {"layer": 0, "head": "added", "weight": 1.0, "heads": 2, "self_attention": True, "diagonal": True}


def test_option_problems_are_reported_together():
    with pytest.raises(ConfigError) as error:
        tiny_config(supervised_alignment={"layer": 0, "head": 1, "weight": 1.0, "heads": 0,
                                          "self_attention": "yes", "diagonal": True})
    assert error.value.problems == [
        "supervised_alignment: heads must be an integer >= 1, got 0",
        "supervised_alignment: self_attention must be true or false, got 'yes'",
        "supervised_alignment: heads, self_attention, diagonal describe(s) an added head; set head to 'added'",
    ]


def test_the_options_round_trip_and_default_to_the_step_wise_head():
    config = tiny_config(supervised_alignment=FULL)
    assert ModelConfig.from_dict(config.to_dict()) == config
    plain = Transformer(tiny_config(supervised_alignment={"layer": 0, "head": "added", "weight": 1.0}))
    head = plain.supervised_alignment
    assert (head.n_heads, head.self_attention, head.diagonal, head.needs_finished_target) == (1, False, False, False)
    # The step-wise head keeps its parameters (models/en-de-align loads unchanged).
    assert sorted(name for name, _ in head.named_parameters()) == [
        "k_proj.bias", "k_proj.weight", "q_proj.bias", "q_proj.weight", "query_norm.bias", "query_norm.weight"]


def test_diagonal_distance_by_hand():
    # source: 4 positions, the last padding (S = 3); target: 2 rows (T = 2).
    source_pad = torch.tensor([[False, False, False, True]])
    target_pad = torch.tensor([[False, False]])
    expected = [[abs(t / 2 - i / 3) for i in range(4)] for t in range(2)]
    assert_close_for(diagonal_distance(source_pad, target_pad)[0], expected, ops=HAND_FORMULA_OPS)


def test_head_averaged_attention_by_hand():
    # One row, two heads of width 1, two source positions and a padded third.
    q = torch.tensor([[[[1.0], [2.0]]]])  # (B=1, T=1, H=2, d=1)
    k = torch.tensor([[[1.0], [0.0]], [[0.0], [1.0]], [[5.0], [5.0]]]).unsqueeze(0)  # (1, S=3, H=2, d=1)
    pad = torch.tensor([[False, False, True]])
    bias = torch.tensor([0.0, -1.0]).view(1, 2, 1, 1) * torch.tensor([0.0, 1.0, 2.0]).view(1, 1, 1, 3)
    out = head_averaged_attention(q, k, pad, bias)[0, 0]
    # head 0: logits (1, 0) ; head 1: logits (0, 2) + bias (0, -1) = (0, 1)
    h0 = [math.exp(1) / (math.exp(1) + 1), 1 / (math.exp(1) + 1)]
    h1 = [1 / (1 + math.e), math.e / (1 + math.e)]
    expected = [(h0[0] + h1[0]) / 2, (h0[1] + h1[1]) / 2, 0.0]
    assert_close_for(out, torch.tensor(expected), ops=TINY_MODEL_OPS)


def test_full_self_attention_reads_later_positions_and_ignores_padding():
    torch.manual_seed(0)
    qkv, out = torch.nn.Linear(8, 24), torch.nn.Linear(8, 8)
    x = torch.randn(1, 4, 8)
    pad = torch.tensor([[False, False, False, True]])
    base = full_self_attention(x, qkv, out, 2, pad)
    later = x.clone()
    later[0, 2] += 1.0
    changed = full_self_attention(later, qkv, out, 2, pad)
    assert not torch.allclose(base[0, 0], changed[0, 0])  # position 0 reads position 2: not causal
    padded = x.clone()
    padded[0, 3] += 5.0
    assert_close_for(base[0, :3], full_self_attention(padded, qkv, out, 2, pad)[0, :3], ops=TINY_MODEL_OPS)
    # One unpadded position attends only to itself: the output is out(v).
    single = full_self_attention(x[:, :1], qkv, out, 2, torch.tensor([[False]]))
    v = qkv(x[:, :1])[..., 16:]
    assert_close_for(single, out(v), ops=TINY_MODEL_OPS)


def _model():
    torch.manual_seed(0)
    model = Transformer(tiny_config(supervised_alignment=FULL)).eval()
    with torch.no_grad():  # random head weights, so that the rows are far from uniform
        for name, p in model.named_parameters():
            if name.startswith("supervised_alignment."):
                p.copy_(torch.randn(p.shape) * 2)
    return model


SRC = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])


def test_padding_a_batch_leaves_each_pair_s_rows_unchanged():
    model = _model()
    tgt_in = torch.tensor([[1, 11, 12, 13], [1, 14, 15, 0]])
    with torch.no_grad():
        batch = model(SRC, tgt_in).supervised_attention
        alone = model(SRC[1:, :3], tgt_in[1:, :3]).supervised_attention
    assert_close_for(batch[1, :3, :3], alone[0], ops=TINY_MODEL_OPS)
    assert_close_for(batch.sum(-1), torch.ones(2, 4), ops=TINY_MODEL_OPS)


def test_a_step_cannot_give_the_rows_and_generate_forces_the_finished_hypotheses():
    model = _model()
    state = model.init_state(model.encode(SRC))
    with pytest.raises(ValueError, match="reads the whole target"):
        model.decode_step(torch.tensor([1, 1]), state, need_supervised=True)
    found = generate(model, SRC, DecodingOptions(beam_size=2, n_best=2, alignment="token",
                                               alignment_method="supervised", max_length_offset=3))
    plain = generate(model, SRC, DecodingOptions(beam_size=2, n_best=2, alignment="token", max_length_offset=3))
    for b, nbest in enumerate(found):
        assert [h.tokens for h in nbest] == [h.tokens for h in plain[b]]
        for h, p in zip(nbest, plain[b]):
            assert torch.equal(h.attention, p.attention)
            tgt_in = torch.tensor([[1, *h.tokens]])
            with torch.no_grad():
                rows = model(SRC[b : b + 1], tgt_in).supervised_attention[0]
            assert h.supervised_attention.shape == (len(h.tokens) + 1, SRC.shape[1])
            assert_close_for(h.supervised_attention, rows, ops=TINY_MODEL_OPS)


def test_several_step_wise_heads_give_the_full_pass_rows_step_by_step():
    torch.manual_seed(0)
    model = Transformer(tiny_config(supervised_alignment={"layer": 1, "head": "added", "weight": 1.0,
                                                          "heads": 3})).eval()
    assert not model.supervised_alignment.needs_finished_target
    tgt_in = torch.tensor([[1, 11, 12, 13], [1, 14, 15, 0]])
    with torch.no_grad():
        full = model(SRC, tgt_in).supervised_attention  # (B, T, S)
        state = model.init_state(model.encode(SRC))
        rows = []
        for t in range(tgt_in.shape[1]):
            out = model.decode_step(tgt_in[:, t], state, need_supervised=True)
            state = out.state
            rows.append(out.supervised_attention)
    assert_close_for(torch.stack(rows, dim=1), full, ops=TINY_MODEL_OPS)
