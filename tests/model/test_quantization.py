"""model/quantization.py: the int8 copy quantises every projection (the tied output projection
included) to within half a quantisation step, and leaves the float32 model as it was."""
from __future__ import annotations

import torch
from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear

from model.quantization import quantize_int8
from tests.helpers import tiny_model


def test_every_linear_is_int8_and_the_float32_model_is_untouched():
    model = tiny_model(0)
    before = {name: t.clone() for name, t in model.state_dict().items()}
    quantised = quantize_int8(model)
    assert model.output_projection is None  # tied: the original still reads its embedding
    assert all(torch.equal(before[name], t) for name, t in model.state_dict().items())
    assert not [name for name, m in quantised.named_modules() if type(m) is torch.nn.Linear]
    assert isinstance(quantised.output_projection, DynamicQuantizedLinear)


def test_the_output_projection_holds_the_embedding_table_to_half_a_step():
    model = tiny_model(0)
    quantised = quantize_int8(model)
    weight = quantised.output_projection.weight()  # per-tensor affine int8
    table = model.source_embedding.tokens.weight
    step = weight.q_scale()
    error = (weight.dequantize() - table).abs().max().item()
    assert 0 < error <= step / 2 + 1e-7


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
