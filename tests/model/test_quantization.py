"""model/quantization.py: the int8 copy quantises every projection (the tied output projection
included) to within half a quantisation step of its channel, and leaves the float32 model as it was."""
from __future__ import annotations

import pytest
import torch

from model.attention.vanilla import VanillaAttention
from model.decoding.generate import generate
from model.int8_linear import Int8Linear
from model.decoding.options import DecodingOptions
from model.layers import FeedForward
from model.quantization import quantize_int8
from tests.export.fixtures import MODEL_CONFIGS
from tests.helpers import randomise_biases, tiny_model

pytestmark = pytest.mark.usefixtures("one_thread")


def test_every_linear_is_int8_and_the_float32_model_is_untouched():
    model = tiny_model(0)
    before = {name: t.clone() for name, t in model.state_dict().items()}
    quantised = quantize_int8(model)
    assert model.output_projection is None  # tied: the original still reads its embedding
    assert all(torch.equal(before[name], t) for name, t in model.state_dict().items())
    assert not [name for name, m in quantised.named_modules() if type(m) is torch.nn.Linear]
    assert isinstance(quantised.output_projection, Int8Linear)


def test_the_output_projection_holds_the_embedding_table_to_half_a_step():
    model = tiny_model(0)
    quantised = quantize_int8(model)
    projection = quantised.output_projection  # int8 per output channel (a token's row)
    table = model.source_embedding.tokens.weight
    step = projection.weight_scale[:, None]
    error = (projection.weight.float() * step - table).abs()
    assert error.max() > 0 and bool((error <= step / 2 * (1 + 1e-6)).all())


def test_int8_log_probs_stay_close_to_float32():
    model = tiny_model(0)
    quantised = quantize_int8(model)
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])  # (B, S)
    tgt_in = torch.tensor([[1, 11, 12], [1, 13, 14]])  # (B, T)
    with torch.inference_mode():
        exact = torch.log_softmax(model(src, tgt_in).logits, -1)
        approx = torch.log_softmax(quantised(src, tgt_in).logits, -1)
    difference = (exact - approx).abs().max().item()
    # A random tiny model has no margin to hide rounding in; a wrong quantisation moves log-probs by units.
    assert 0 < difference < 0.25


@pytest.mark.parametrize("config_id", list(MODEL_CONFIGS))
def test_every_model_family_quantises_and_decodes(config_id):
    """Every family's linear layers quantise (convolutions and the families' own parameters stay
    float32), its full pass stays close to float32's and it decodes. (Incremental decoding does not
    equal the int8 full pass: activation scales are taken per call, over the tensor a call sees.)"""
    model = randomise_biases(tiny_model(0, **MODEL_CONFIGS[config_id]))
    quantised = quantize_int8(model)
    left = {name for name, m in quantised.named_modules() if type(m) is torch.nn.Linear}
    expected = {f"{site}.{name}" for site, m in model.named_modules() if type(m) is not VanillaAttention
                and type(m) is not FeedForward for name, child in m.named_children() if type(child) is torch.nn.Linear}
    assert left == expected  # float32 exactly where the family reads weights itself
    assert sum(type(m) is Int8Linear for m in quantised.modules()) > 4
    src = torch.tensor([[5, 6, 7, 8, 9, 2], [9, 10, 11, 2, 0, 0]])  # (B, S)
    tgt_in = torch.tensor([[1, 11, 12, 13], [1, 13, 14, 15]])  # (B, T)
    with torch.inference_mode():
        exact = torch.log_softmax(model(src, tgt_in).logits, -1)
        approx = torch.log_softmax(quantised(src, tgt_in).logits, -1)
    assert (exact - approx).abs().max().item() < 0.25
    found = generate(quantised, src, DecodingOptions(beam_size=2, max_length_offset=3))
    assert len(found) == 2 and all(len(nbest) == 1 and len(nbest[0].tokens) <= 12 for nbest in found)
