"""PyTorch's dynamic int8 linear layer in the C kernels, for the fused decoder step and encoder.

A decoding step of the bundled model calls the int8 operator 25 times (~2.5 µs each, as a search
calls it) for well under 1 µs of arithmetic each, beside some 20 attention and norm kernel calls:
for one sentence at a time the step was mostly calls. decoding.c's `phrasal_int8_linear` computes
the operator's numbers bit for bit (its comment says how) from weights packed once here
(`Int8Linear`), so that `phrasal_decoder_step` and `phrasal_encoder` (kernel_backend.py,
`FusedStep`, `FusedEncoder`) can run a whole step, or the encoder, in one call. Called alone through ctypes the kernel is no faster than the operator
(benchmarks/fused_step.py), so layers called one at a time keep the operator
(`operator_function`).

Bit for bit holds for the fbgemm engine on x86 with the reduced input range the model's layers
use; on other engines (QNNPACK on ARM) the operator computes otherwise. So before the first use in
a process the kernel is checked against the operator on random layers (`agreement_problem`);
where they differ, or the kernels are unavailable, the step stays one call per layer.
"""
from __future__ import annotations

import threading
from collections.abc import Callable

import torch
from torch import nn
from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear

from model.cpu_kernels import library

# The rows an Int8Linear call computes in the kernel; above, the operator (the same numbers).
C_MAX_ROWS = 64
BLOCK, GROUP = 16, 4  # output channels per packed block, inputs per group (decoding.c)


def reduce_range_of(module: DynamicQuantizedLinear) -> bool:
    """The reduce_range its forward passes to the operator (versions before 4 pass none)."""
    return module.version is not None and module.version >= 4


def operator_function(module: DynamicQuantizedLinear, relu: bool = False) -> Callable[[torch.Tensor], torch.Tensor]:
    """The int8 operator on `module`'s packed weights, with the arguments its own forward passes
    (with `relu` the operator that applies it to the float output), as a bare function."""
    packed = module._packed_params._packed_params
    reduce_range = reduce_range_of(module)
    operator = (torch.ops.quantized.linear_relu_dynamic if relu else torch.ops.quantized.linear_dynamic).default
    # The overload's C++ function itself (its Python __call__ only forwards).
    call = getattr(operator, "_op", operator)
    return lambda x: call(x, packed, reduce_range)


class Int8Linear:
    """`module` (int8, dynamically quantised, reduce_range) packed for the kernel, and as a
    function of (rows, in) float32 inputs: the kernel up to C_MAX_ROWS rows, the operator above;
    the same numbers either way."""

    def __init__(self, module: DynamicQuantizedLinear, relu: bool = False):
        weight = module.weight()
        if weight.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
            scales = torch.full((weight.shape[0],), weight.q_scale(), dtype=torch.float32)
            zero_points = torch.full((weight.shape[0],), weight.q_zero_point(), dtype=torch.long)
        else:
            scales = weight.q_per_channel_scales().to(torch.float32)
            zero_points = weight.q_per_channel_zero_points()
        if bool(zero_points.ne(0).any()):
            raise ValueError("the kernel takes symmetric int8 weights (zero point 0)")
        integers = weight.int_repr()  # (out, in) int8
        self.out_features, self.in_features = integers.shape
        self.k4 = -(-self.in_features // GROUP) * GROUP
        self.weights = pack(integers)
        self.sums = integers.to(torch.int32).sum(1, dtype=torch.int32).contiguous()
        self.scales = scales.contiguous()
        bias = module.bias()
        self.bias = bias.detach().to(torch.float32).contiguous() if bias is not None else None
        self.reduce_range = int(reduce_range_of(module))
        self.relu = int(relu)
        self.operator = operator_function(module, relu)
        self._lib = library()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0]
        if rows > C_MAX_ROWS or x.dim() != 2 or not x.is_contiguous() or x.dtype != torch.float32:
            return self.operator(x)
        out = torch.empty(rows, self.out_features)
        # Scratch per call, not per layer: searches in two threads may share the layer.
        scratch = torch.empty(rows * self.k4, dtype=torch.uint8)
        self._lib.phrasal_int8_linear(
            x.data_ptr(), rows, self.in_features, self.weights.data_ptr(), self.sums.data_ptr(),
            self.scales.data_ptr(), self.bias.data_ptr() if self.bias is not None else None, self.out_features,
            self.reduce_range, self.relu, out.data_ptr(), scratch.data_ptr())
        return out


def pack(integers: torch.Tensor) -> torch.Tensor:
    """(out, in) int8 weights in decoding.c's layout: blocks of 16 output channels, each a run of
    groups of 4 inputs x 16 channels x 4 bytes; zero weights pad both sizes."""
    out_features, in_features = integers.shape
    n16, k4 = -(-out_features // BLOCK) * BLOCK, -(-in_features // GROUP) * GROUP
    padded = torch.zeros(n16, k4, dtype=torch.int8)
    padded[:out_features, :in_features] = integers
    return padded.view(n16 // BLOCK, BLOCK, k4 // GROUP, GROUP).permute(0, 2, 1, 3).contiguous()


_agreement: tuple[str | None] | None = None
_agreement_lock = threading.Lock()


def agreement_problem() -> str | None:
    """None when the kernel gives the operator's numbers on this machine (checked once a process
    on random layers: odd sizes, a per-channel fused weight, ReLU, inputs of every sign and
    scale); else why it cannot replace the operator here."""
    global _agreement
    with _agreement_lock:
        if _agreement is None:
            _agreement = (_check_agreement(),)
        return _agreement[0]


def _check_agreement() -> str | None:
    if library() is None:
        return "the CPU kernels are unavailable"
    generator = torch.Generator().manual_seed(0)
    for in_features, out_features, relu, scale in ((128, 384, False, 1.0), (33, 17, True, 30.0), (256, 128, False, 1e-6),
                                                   (7, 40, True, 1e-3)):
        with torch.random.fork_rng(devices=[]):  # nn.Linear's initialisation must not move the caller's RNG
            layer = nn.Linear(in_features, out_features)
        with torch.no_grad():
            layer.weight.copy_(torch.randn(out_features, in_features, generator=generator) / in_features ** 0.5)
            layer.bias.copy_(torch.randn(out_features, generator=generator))
        module = quantize_linear(layer)
        kernel = Int8Linear(module, relu)
        for rows in (1, 5, C_MAX_ROWS):
            x = torch.randn(rows, in_features, generator=generator) * scale
            for sample in (x, x.abs(), -x.abs()):
                if not torch.equal(kernel(sample), kernel.operator(sample)):
                    return (f"the int8 kernel differs from torch.ops.quantized.linear_dynamic on this machine "
                            f"(engine {torch.backends.quantized.engine})")
    return None


def quantize_linear(layer: nn.Linear) -> DynamicQuantizedLinear:
    """`layer` dynamically quantised as model/quantization.py quantises the model's layers."""
    from model.quantization import quantize_dynamic_int8

    return quantize_dynamic_int8(nn.Sequential(layer), {nn.Linear})[0]
