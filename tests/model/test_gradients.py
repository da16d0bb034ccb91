"""Backpropagation through every attention family equals the derivative it claims to be.

For one parameter of each family, the autograd gradient of the mean token cross-entropy is
compared with a central finite difference, (L(θ + ε) − L(θ − ε)) / 2ε, on the three entries with
the largest gradient and on entry 0. The model runs in float64 with ε = 1e-4; the difference's
truncation error is O(ε²) (measured: 1e-9 to 2e-7 relative), and the test allows 1e-5 relative
plus 1e-9 absolute. A gradient that is merely non-zero (a wrong sign, a missing scale, a
detached term) fails here.

The attention math casts to float32 with `.float()` by design (mixed-precision training must
never softmax in half precision), which in a float64 model would leave float32 rounding noise
of ~1e-3 relative in the difference. For this check only, `Tensor.float` keeps float64 tensors
in float64 (the `float64_attention` fixture), so what is compared is the calculus, not rounding.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from model.config import AttentionConfig
from tests.helpers import randomise_biases, tiny_model

SRC = torch.tensor([[5, 6, 7, 8, 9, 10, 2], [9, 10, 11, 2, 0, 0, 0]])
TGT_IN = torch.tensor([[1, 11, 12, 13, 14], [1, 15, 16, 0, 0]])
TGT_OUT = torch.tensor([[11, 12, 13, 14, 2], [15, 16, 2, 0, 0]])
HETEROGENEOUS = {"structure": "heterogeneous", "ngrams": [1, 2, 3]}
EPS = 1e-4
RTOL, ATOL = 1e-5, 1e-9

FAMILIES = {
    "vanilla": ({}, "decoder_layers.1.cross_attention.k_proj.weight"),
    "convkv": ({"cross_attention": AttentionConfig("convkv", HETEROGENEOUS)},
               "decoder_layers.1.cross_attention.keys.0.1.weight"),
    "queryk": ({"cross_attention": AttentionConfig("queryk", HETEROGENEOUS)},
               "decoder_layers.1.cross_attention.q_proj.weight"),
    "fine2d": ({"cross_attention": AttentionConfig("fine2d")}, "decoder_layers.1.cross_attention.r_proj.weight"),
    "fine2d-mlp": ({"cross_attention": AttentionConfig("fine2d", {"score": "mlp"})},
                   "decoder_layers.1.cross_attention.score_weight"),
    "fine2d-mlp-keys": ({"cross_attention": AttentionConfig("fine2d", {"score": "mlp"})},
                        "decoder_layers.1.cross_attention.k_proj.weight"),
    "phrase-representation": ({"phrase_representation": {"glance": "mean"}}, "phrase_pooling.0.score.weight"),
    "phrase-representation-mix": ({"phrase_representation": {"glance": "max"}},
                                  "decoder_layers.0.phrase_attention.mix_logits"),
    "phrase-representation-decoder-combination": ({"phrase_representation": {}},
                                                  "decoder_layers.0.phrase_attention.merge.hidden.weight"),
    "phrase-representation-encoder-combination": ({"phrase_representation": {"activation": "relu"}},
                                                  "encoder_layers.0.phrase_combination.merge.hidden.weight"),
    "phrase-representation-max-pooling": ({"phrase_representation": {"pooling": "max", "transparent": False}},
                                          "phrase_pooling.1.norm.weight"),
    "alignment-biases-markov": ({"alignment_biases": {"markov": {"window": 1, "form": "parallel"}}},
                                "decoder_layers.1.cross_attention.biases.markov.weight"),
    "alignment-biases-fertility": ({"alignment_biases": {"fertility": {"window": 1, "form": "parallel"}}},
                                   "decoder_layers.1.cross_attention.biases.fertility.weight"),
    # The paper's form: the gradient also flows through the biased rows carried to later steps.
    "alignment-biases-markov-recurrent": ({"alignment_biases": {"markov": {"window": 1, "form": "recurrent"}}},
                                          "decoder_layers.1.cross_attention.biases.markov.weight"),
    "alignment-biases-fertility-recurrent": ({"alignment_biases": {"fertility": {"window": 1, "form": "recurrent"}}},
                                             "decoder_layers.1.cross_attention.biases.fertility.weight"),
    "alignment-biases-recurrent-queries": ({"alignment_biases": {"markov": {"window": 1, "form": "recurrent"},
                                                                 "fertility": {"window": 1, "form": "recurrent"}}},
                                           "decoder_layers.1.cross_attention.inner.q_proj.weight"),
    "alignment-biases-position": ({"alignment_biases": {"position": {}}},
                                  "decoder_layers.1.cross_attention.biases.position.hidden.weight"),
}


@pytest.fixture
def float64_attention(monkeypatch):
    to_float32 = torch.Tensor.float

    def float_unless_float64(self, *args, **kwargs):
        return self if self.dtype == torch.float64 else to_float32(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "float", float_unless_float64)


def sequence_loss(model) -> torch.Tensor:
    logits = model(SRC, TGT_IN).logits  # (B, T, V)
    assert logits.dtype == torch.float64
    return F.cross_entropy(logits.flatten(0, 1), TGT_OUT.flatten(), ignore_index=0)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_autograd_equals_a_central_finite_difference(family, float64_attention):
    config, name = FAMILIES[family]
    model = randomise_biases(tiny_model(seed=3, **config)).double().eval()
    parameter = dict(model.named_parameters())[name]
    (gradient,) = torch.autograd.grad(sequence_loss(model), parameter)
    flat = parameter.data.view(-1)
    entries = sorted({0, *gradient.abs().reshape(-1).topk(3).indices.tolist()})
    with torch.no_grad():
        for index in entries:
            original = flat[index].item()
            flat[index] = original + EPS
            up = sequence_loss(model).item()
            flat[index] = original - EPS
            down = sequence_loss(model).item()
            flat[index] = original
            numeric = (up - down) / (2 * EPS)
            analytic = gradient.reshape(-1)[index].item()
            assert abs(analytic - numeric) <= ATOL + RTOL * abs(numeric), (index, analytic, numeric)
    assert gradient.abs().max().item() > 1e-3  # the entries compared carry real signal
