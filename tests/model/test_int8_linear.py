"""model/int8_linear.py and decoding.c's int8 kernel: the kernel gives its reference's
numbers bit for bit on every branch of the per-row quantisation (inputs of one sign, all zero, one
value, tiny and huge ranges), with and without bias and ReLU, at odd sizes and across the 4-row
and 16-channel blocks; the reference is the layer a hand computation gives; a row's output does not
depend on the other rows; the packing puts each weight where the kernel reads it; and the fused
int8 decoder step gives the per-layer step bit for bit (float32's, up to rounding:
tests/model/test_kernel_backend.py)."""
from __future__ import annotations

import pytest
import torch

import model.int8_linear as int8_linear
import model.decoding.kernel_backend as kernel_backend
from model.decoding.generate import generate
from model.int8_linear import Int8Linear, agreement_problem, kernel_call, pack, random_layer, reference
from model.decoding.kernel_backend import KernelBackend, fused_linear
from model.decoding.options import DecodingOptions
from model.quantization import quantize_int8
from tests.helpers import tiny_model

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True)
def kernels_agree():
    if agreement_problem() is not None:
        pytest.skip(agreement_problem())


def layer(in_features: int, out_features: int, bias: bool = True, seed: int = 0) -> Int8Linear:
    return random_layer(in_features, out_features, torch.Generator().manual_seed(seed), bias)


# (rows, input): the branches of the per-row quantisation
INPUTS = {
    "normal": lambda rows, k: torch.randn(rows, k),
    "wide": lambda rows, k: torch.randn(rows, k) * 100,
    "tiny": lambda rows, k: torch.randn(rows, k) * 1e-6,
    "huge": lambda rows, k: torch.randn(rows, k) * 1e30,
    "positive only": lambda rows, k: torch.rand(rows, k) * 3,
    "negative only": lambda rows, k: -torch.rand(rows, k) * 3,
    "all zero": lambda rows, k: torch.zeros(rows, k),
    "one value": lambda rows, k: torch.full((rows, k), 0.37),
    "rows of every scale": lambda rows, k: torch.randn(rows, k) * torch.logspace(-4, 4, rows)[:, None],
}


@pytest.mark.parametrize("kind", sorted(INPUTS))
@pytest.mark.parametrize("in_features, out_features, rows", [(128, 384, 1), (256, 128, 5), (7, 17, 3),
                                                             (33, 40, 70), (128, 1000, 2)])
def test_the_kernel_is_its_reference_bit_for_bit(kind, in_features, out_features, rows):
    torch.manual_seed(rows)
    x = INPUTS[kind](rows, in_features)
    for bias in (True, False):
        module = layer(in_features, out_features, bias)
        for relu in (False, True):
            want = reference(x, module.weight, module.weight_scale, module.bias, relu)
            assert torch.equal(kernel_call(module, x, relu), want), f"bias={bias} relu={relu}"
            assert torch.equal(module.function(relu)(x), want)


def test_the_reference_is_the_hand_computed_layer():
    # One row [-1, 0.5, 3]: lo -1, hi 3, scale 4/127, zero point round(127/4) = 32 (31.75),
    # q = round(x·127/4) + 32 = [0, 48, 127] (-31.75 -> -32, 15.875 -> 16, 95.25 -> 95);
    # weights [[1, -2, 3]] scale 0.5: acc = Σ(q - 32)·w = -32 - 32 + 285 = 221,
    # out = 221 · (4/127 · 0.5) + 0.25.
    x = torch.tensor([[-1.0, 0.5, 3.0]])
    integers = torch.tensor([[1, -2, 3]], dtype=torch.int8)
    scales, bias = torch.tensor([0.5]), torch.tensor([0.25])
    scale = torch.tensor(4.0) / torch.tensor(127.0)
    want = torch.tensor(221.0) * (scale * torch.tensor(0.5)) + torch.tensor(0.25)
    assert torch.equal(reference(x, integers, scales, bias), want.view(1, 1))
    assert torch.equal(kernel_call(Int8Linear(integers, scales, bias), x), want.view(1, 1))
    assert abs(want.item() - (-1 * 1 + 0.5 * -2 + 3 * 3) * 0.5 - 0.25) < 0.05  # the layer it approximates: 3.75


def test_a_rows_output_does_not_depend_on_the_other_rows():
    module = layer(64, 48, seed=4)
    torch.manual_seed(0)
    alone = torch.randn(1, 64)
    others = torch.randn(9, 64) * 50  # a far wider range than the row's: one scale per call would coarsen it
    together = torch.cat([others[:4], alone, others[4:]])
    assert torch.equal(module(together)[4:5], module(alone))


def test_side_by_side_layers_give_theirs_bit_for_bit():
    parts = [layer(64, 48, seed=1), layer(64, 48, seed=2), layer(64, 16, bias=False, seed=3)]
    fused = fused_linear(parts)
    assert type(fused) is Int8Linear and fused.out_features == 112
    x = torch.randn(6, 64) * 2
    assert torch.equal(fused(x), torch.cat([part(x) for part in parts], dim=1))


def test_a_layers_function_outlives_the_layer():
    # kernel_backend.bare_linear keeps only the function of a fused layer made for it: the
    # function must hold the layer's tensors (once, the bias was held by its address alone).
    import gc

    parts = [layer(64, 48, seed=1), layer(64, 16, seed=2)]
    x = torch.randn(6, 64)
    want = torch.cat([part(x) for part in parts], dim=1)
    function = fused_linear(parts).function()
    gc.collect()
    reuse = [torch.full((64,), 1e6) for _ in range(1000)]  # freed memory gets written
    assert torch.equal(function(x), want)
    del reuse


def test_quantised_weights_are_within_half_a_step_per_channel():
    weight = torch.randn(20, 9) * torch.logspace(-3, 3, 20)[:, None]  # channels of every scale
    weight[3] = 0
    module = Int8Linear.quantize(weight, None)
    assert module.weight.abs().amax(1)[torch.arange(20) != 3].eq(127).all()  # each channel's largest is ±127
    error = (module.weight.float() * module.weight_scale[:, None] - weight).abs()
    assert bool((error <= module.weight_scale[:, None] / 2 * (1 + 1e-6)).all())
    assert module.weight[3].eq(0).all() and module.weight_scale[3] == 1


def test_packing_puts_each_weight_where_the_kernel_reads_it():
    # Block of 16 output channels, then groups of 4 inputs, then channel, then input within the group.
    integers = (torch.arange(20 * 6) % 251 - 125).to(torch.int8).view(20, 6)
    packed = pack(integers)
    assert packed.shape == (2, 2, 16, 4)  # 20 -> 32 outputs, 6 -> 8 inputs
    for out_channel, in_feature in ((0, 0), (3, 5), (15, 4), (16, 1), (19, 5)):
        block, channel = divmod(out_channel, 16)
        group, within = divmod(in_feature, 4)
        assert packed[block, group, channel, within] == integers[out_channel, in_feature]
    assert packed[1, :, 4:].eq(0).all() and packed[:, 1, :, 2:].eq(0).all()  # the padding is zero


def test_a_machine_where_they_disagree_computes_the_reference_one_call_per_layer(monkeypatch):
    module = layer(32, 16)
    x = torch.randn(5, 32)
    want = module(x)
    monkeypatch.setattr(int8_linear, "_agreement", ("differs here",))
    monkeypatch.setattr(int8_linear, "library", lambda: None)  # the kernel may not be called
    assert torch.equal(module(x), want)
    model = quantize_int8(tiny_model(8))
    monkeypatch.setattr(kernel_backend, "agreement_problem", lambda: "differs here")
    assert KernelBackend(model)._fused_step is None


def test_the_fused_step_gives_the_per_layer_step_bit_for_bit():
    model = quantize_int8(tiny_model(8))
    fused, per_layer = KernelBackend(model), KernelBackend(model)
    per_layer._fused_step = None
    assert fused._fused_step is not None and fused._fused_step.int8
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0], [11, 12, 13, 2, 0]])
    for beam in (1, 3, 5):  # 3 to 15 rows
        options = DecodingOptions(beam_size=beam, n_best=beam, alignment="token")
        want, got = generate(per_layer, src, options), generate(fused, src, options)
        for nbest, expected in zip(got, want):
            for h, w in zip(nbest, expected):
                assert h.tokens == w.tokens and h.score == w.score
                assert torch.equal(h.attention, w.attention)


def test_an_int8_translation_is_the_same_alone_and_in_a_batch():
    # Every kernel computes a row (a position, a beam) from that row alone, in a fixed order, so
    # beside sources of its own length (no padding, which changes the attention sums' rounding, as
    # in float32) a sentence's search is its search alone, bit for bit. With one input scale per
    # call (PyTorch's dynamic int8) the other sentences' values moved its numbers.
    decoder = KernelBackend(quantize_int8(tiny_model(8)))
    sentence = [5, 6, 7, 8, 2]
    batch = torch.tensor([[90, 100, 110, 120, 2], sentence, [150, 160, 170, 180, 2]])
    options = DecodingOptions(beam_size=3, n_best=3)
    alone = generate(decoder, torch.tensor([sentence]), options)[0]
    together = generate(decoder, batch, options)[1]
    assert [(h.tokens, h.score) for h in together] == [(h.tokens, h.score) for h in alone]


def test_the_agreement_check_leaves_the_callers_random_state(monkeypatch):
    monkeypatch.setattr(int8_linear, "_agreement", None)  # check again in this process
    torch.manual_seed(5)
    want = torch.rand(3)
    torch.manual_seed(5)
    assert agreement_problem() is None
    assert torch.equal(torch.rand(3), want)


def test_the_layer_takes_any_leading_shape():
    module = layer(12, 7)
    x = torch.randn(2, 3, 12)
    assert torch.equal(module(x), module(x.reshape(6, 12)).view(2, 3, 7))
