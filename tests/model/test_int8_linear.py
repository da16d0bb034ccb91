"""model/decoding/int8_linear.py and decoding.c's int8 kernels: the kernel gives PyTorch's dynamic
int8 operator bit for bit on every branch of its input quantisation (scale from the range, the
small-scale floor, the degenerate range, inputs of one sign), with and without bias and ReLU, on
per-tensor and per-channel (fused) weights and odd sizes; the packing puts each weight where the
kernel reads it; and the fused int8 decoder step gives the per-layer step bit for bit (float32's,
up to rounding: tests/model/test_kernel_backend.py)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from model.decoding.generate import generate
import model.decoding.kernel_backend as kernel_backend
from model.decoding.int8_linear import C_MAX_ROWS, Int8Linear, agreement_problem, pack, quantize_linear
from model.decoding.kernel_backend import KernelBackend, fused_linear
from model.decoding.options import DecodingOptions
from model.quantization import quantize_int8
from tests.helpers import tiny_model

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(autouse=True)
def fbgemm_engine():
    # Bit for bit holds against fbgemm (x86); elsewhere int8_function keeps the operator.
    if torch.backends.quantized.engine not in ("x86", "fbgemm") or agreement_problem() is not None:
        pytest.skip(f"the kernel replaces the operator only on fbgemm: {agreement_problem()}")


def layer(in_features: int, out_features: int, bias: bool = True, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return quantize_linear(nn.Linear(in_features, out_features, bias=bias))


# (rows, input): the branches of ChooseQuantizationParams and of the rounding
INPUTS = {
    "normal": lambda rows, k: torch.randn(rows, k),
    "wide": lambda rows, k: torch.randn(rows, k) * 100,
    "below the small-scale floor": lambda rows, k: torch.randn(rows, k) * 1e-6,
    "positive only": lambda rows, k: torch.rand(rows, k) * 3,
    "negative only": lambda rows, k: -torch.rand(rows, k) * 3,
    "all zero": lambda rows, k: torch.zeros(rows, k),
    "one value": lambda rows, k: torch.full((rows, k), 0.37),
    "tiny positive only": lambda rows, k: torch.rand(rows, k) * 1e-7,
}


@pytest.mark.parametrize("kind", sorted(INPUTS))
@pytest.mark.parametrize("in_features, out_features, rows", [(128, 384, 1), (256, 128, 5), (7, 17, 3),
                                                             (33, 40, C_MAX_ROWS), (128, 1000, 2)])
def test_the_kernel_is_the_operator_bit_for_bit(kind, in_features, out_features, rows):
    torch.manual_seed(rows)
    x = INPUTS[kind](rows, in_features)
    for bias in (True, False):
        module = layer(in_features, out_features, bias)
        for relu in (False, True):
            kernel = Int8Linear(module, relu)
            assert torch.equal(kernel(x), kernel.operator(x)), f"bias={bias} relu={relu}"


def test_a_fused_per_channel_weight_is_the_operator_bit_for_bit():
    fused = fused_linear([layer(64, 48, seed=1), layer(64, 48, seed=2), layer(64, 16, bias=False, seed=3)])
    assert fused.weight().qscheme() == torch.per_channel_affine
    kernel = Int8Linear(fused)
    x = torch.randn(6, 64) * 2
    assert torch.equal(kernel(x), kernel.operator(x))


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


def test_more_rows_than_the_kernel_takes_go_to_the_operator():
    kernel = Int8Linear(layer(32, 16))

    class NoKernel:
        def phrasal_int8_linear(self, *args):
            raise AssertionError("the kernel ran")

    kernel._lib = NoKernel()
    x = torch.randn(C_MAX_ROWS + 1, 32)
    assert torch.equal(kernel(x), kernel.operator(x))


def test_a_machine_where_they_disagree_runs_one_call_per_layer(monkeypatch):
    model = quantize_int8(tiny_model(8))
    assert KernelBackend(model)._fused_step is not None
    monkeypatch.setattr(kernel_backend, "agreement_problem", lambda: "differs here")
    assert KernelBackend(model)._fused_step is None


def test_layers_without_the_reduced_range_run_one_call_per_layer():
    model = quantize_int8(tiny_model(8))
    model.decoder_layers[1].ffn.down.version = 3  # before version 4 the module's forward passes no reduce_range
    assert KernelBackend(model)._fused_step is None


def test_the_fused_fused_step_gives_the_per_layer_step_bit_for_bit():
    model = quantize_int8(tiny_model(8))
    fused, per_layer = KernelBackend(model), KernelBackend(model)
    per_layer._fused_step = None
    assert fused._fused_step is not None
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0], [11, 12, 13, 2, 0]])
    for beam in (1, 3, 5):  # 3 to 15 rows
        options = DecodingOptions(beam_size=beam, n_best=beam, alignment="token")
        want, got = generate(per_layer, src, options), generate(fused, src, options)
        for nbest, expected in zip(got, want):
            for h, w in zip(nbest, expected):
                assert h.tokens == w.tokens and h.score == w.score
                assert torch.equal(h.attention, w.attention)


def test_steps_with_more_rows_than_the_fused_step_takes_run_one_call_per_layer(monkeypatch):
    model = quantize_int8(tiny_model(8))
    per_layer, backend = KernelBackend(model), KernelBackend(model)
    per_layer._fused_step = None
    ran = []
    run = backend._fused_step.run
    monkeypatch.setattr(backend._fused_step, "run", lambda state, x, *rest: ran.append(x.shape[0]) or run(state, x, *rest))
    monkeypatch.setattr(kernel_backend, "FUSED_INT8_MAX_ROWS", 4)
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0], [11, 12, 13, 2, 0]])
    want = generate(per_layer, src, DecodingOptions(beam_size=3))
    got = generate(backend, src, DecodingOptions(beam_size=3))
    assert [[(h.tokens, h.score) for h in n] for n in got] == [[(h.tokens, h.score) for h in n] for n in want]
    assert ran[0] == 3 and max(ran) <= 4  # the first step (one row a sentence) fused, the 9-row steps not


def test_a_float_model_gets_the_float_fused_step_at_every_size(monkeypatch):
    backend = KernelBackend(tiny_model(8))
    assert not backend._fused_step.int8
    ran = []
    run = backend._fused_step.run
    monkeypatch.setattr(backend._fused_step, "run", lambda state, x, *rest: ran.append(x.shape[0]) or run(state, x, *rest))
    monkeypatch.setattr(kernel_backend, "FUSED_INT8_MAX_ROWS", 1)  # int8's limit: not float32's
    generate(backend, torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0], [11, 12, 13, 2, 0]]), DecodingOptions(beam_size=3))
    assert ran[0] == 3 and max(ran) == 9  # every step fused, the 9-row steps too


def test_the_agreement_check_leaves_the_callers_random_state(monkeypatch):
    import model.decoding.int8_linear as int8_linear

    monkeypatch.setattr(int8_linear, "_agreement", None)  # check again in this process
    torch.manual_seed(5)
    want = torch.rand(3)
    torch.manual_seed(5)
    assert agreement_problem() is None
    assert torch.equal(torch.rand(3), want)


def test_asymmetric_int8_weights_run_one_call_per_layer():
    import warnings

    model = quantize_int8(tiny_model(8))
    down = model.decoder_layers[0].ffn.down
    weight = down.weight().dequantize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch deprecates quantised tensor creation
        asymmetric = torch.quantize_per_tensor(weight, float(weight.abs().max()) / 100, 3, torch.qint8)
    down.set_weight_bias(asymmetric, down.bias())
    with pytest.raises(ValueError, match="zero point 0"):
        Int8Linear(down)
    backend = KernelBackend(model)
    assert backend._fused_step is None
    hypotheses = generate(backend, torch.tensor([[5, 6, 7, 2]]), DecodingOptions(beam_size=2))
    assert hypotheses[0][0].tokens
