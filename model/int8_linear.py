"""The int8 linear layer of the CPU int8 path: int8 weights per output channel, each input row
quantised with its own scale, computed in decoding.c's `phrasal_int8_linear`.

Each row's scale is taken from that row alone, as CTranslate2 quantises its int8 inputs, so a
row's output does not depend on the other rows of the call: an int8 translation is the same
alone or in a batch with any other texts, and an incremental step gives the full pass's rows
(PyTorch's dynamic int8 operator, which this replaces, takes one scale for the whole tensor).

`reference` computes the layer in PyTorch operations, each one IEEE operation that the kernel
performs in the same order, so the two agree bit for bit by construction; the kernel is checked
against it once a process before use (`agreement_problem`), and where the kernels are unavailable
or disagree the layer computes `reference` itself (the same numbers, slower). `Int8Linear` is the
layer as a module (what model/quantization.py puts in place of nn.Linear) and holds its weights
packed for the kernel, so that the fused decoder step and encoder (model/decoding/kernel_backend.py, `FusedStep`,
`FusedEncoder`) read them in place.
"""
from __future__ import annotations

import threading
from collections.abc import Callable

import torch
from torch import nn

from model.cpu_kernels import library

BLOCK, GROUP = 16, 4  # output channels per packed block, inputs per group (decoding.c)
QMAX = 127  # the largest quantised input (decoding.c's INT8_QMAX): seven bits


def scratch_bytes(rows: int, in_features: int) -> int:
    """The `quantized` scratch decoding.c's int8 layer needs for `rows` inputs of `in_features`:
    the quantised rows (padded to 4 bytes), then each row's scale and zero point."""
    return rows * (-(-in_features // GROUP) * GROUP) + rows * 8


class Int8Linear(nn.Module):
    """y = x·Wᵀ + b, W symmetric int8 per output channel (`weight`, `weight_scale`), x quantised
    per row (decoding.c's comment above `int8_quantize_row`). Float32 in and out, any leading shape."""

    def __init__(self, integers: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        if integers.dtype != torch.int8 or integers.dim() != 2:
            raise ValueError("Int8Linear takes (out, in) int8 weights")
        self.out_features, self.in_features = integers.shape
        self.register_buffer("weight", integers.contiguous())
        self.register_buffer("weight_scale", scales.to(torch.float32).contiguous())
        self.register_buffer("bias", bias.detach().to(torch.float32).contiguous() if bias is not None else None)
        # What the kernel reads: the weights in its layout and each channel's Σw (not saved: derived).
        self.register_buffer("packed", pack(integers), persistent=False)
        self.register_buffer("sums", integers.to(torch.int32).sum(1, dtype=torch.int32).contiguous(), persistent=False)

    @classmethod
    def quantize(cls, weight: torch.Tensor, bias: torch.Tensor | None) -> "Int8Linear":
        """The layer of float (out, in) `weight` and `bias` (an nn.Linear's), its weights rounded to
        int8, each output channel scaled by its largest magnitude over 127."""
        weight = weight.detach().to(torch.float32)
        largest = weight.abs().amax(1)
        scales = torch.where(largest > 0, largest / QMAX, torch.ones_like(largest))
        integers = torch.round(weight / scales[:, None]).clamp_(-QMAX, QMAX).to(torch.int8)
        return cls(integers, scales, bias)

    @classmethod
    def side_by_side(cls, parts: list["Int8Linear"]) -> "Int8Linear":
        """One layer computing `parts` side by side (outputs concatenated), bit for bit theirs: their
        inputs are the same rows, quantised the same way, and each channel keeps its scale."""
        biases = [p.bias if p.bias is not None else torch.zeros(p.out_features) for p in parts]
        return cls(torch.cat([p.weight for p in parts]), torch.cat([p.weight_scale for p in parts]), torch.cat(biases))

    def function(self, relu: bool = False) -> Callable[[torch.Tensor], torch.Tensor]:
        """The layer (with `relu`, followed by a ReLU) on contiguous (rows, in) float32 inputs,
        without nn.Module's call machinery: the kernel where it agrees with `reference`, else it."""
        if agreement_problem() is not None:
            return lambda x: reference(x, self.weight, self.weight_scale, self.bias, relu)
        return _kernel(self, relu, library())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).to(torch.float32).contiguous()
        return self.function()(rows).view(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def reference(x: torch.Tensor, integers: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None,
              relu: bool = False) -> torch.Tensor:
    """The int8 layer on (rows, in) float32 inputs in PyTorch operations: decoding.c's numbers, each
    step the same IEEE operation (tensor by tensor, so no operation is rewritten, as a division by
    a scalar may be into a multiplication). The integer sums run in float64, exact."""
    lo = x.amin(1).clamp(max=0) if x.shape[1] else x.new_zeros(x.shape[0])
    hi = x.amax(1).clamp(min=0) if x.shape[1] else x.new_zeros(x.shape[0])
    scale = torch.div(hi - lo, torch.full_like(lo, QMAX))
    scale = torch.where((scale > 0) & torch.isfinite(scale), scale, torch.ones_like(scale))
    inverse = torch.div(torch.ones_like(scale), scale)
    zero_point = torch.round(torch.neg(lo) * inverse).clamp(0, QMAX)
    q = (torch.round(x * inverse[:, None]) + zero_point[:, None]).clamp(0, QMAX)
    acc = ((q - zero_point[:, None]).double() @ integers.double().t()).float()  # < 2^31 in magnitude: exact
    out = acc * (scale[:, None] * scales[None, :])
    if bias is not None:
        out = out + bias
    return out.clamp(min=0) if relu else out


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
    """None when the kernel gives `reference`'s numbers on this machine (checked once a process on
    random layers: odd sizes, ReLU, inputs of every sign and scale, an all-zero row); else why the
    layers compute `reference` instead."""
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
        layer = random_layer(in_features, out_features, generator)
        for rows in (1, 5, 70):
            x = torch.randn(rows, in_features, generator=generator) * scale
            x[rows // 2] = 0
            for sample in (x, x.abs(), -x.abs()):
                want = reference(sample, layer.weight, layer.weight_scale, layer.bias, relu)
                if not torch.equal(kernel_call(layer, sample, relu), want):
                    return "the int8 kernel differs from its reference (model/int8_linear.py) on this machine"
    return None


def kernel_call(layer: Int8Linear, x: torch.Tensor, relu: bool = False, lib=None) -> torch.Tensor:
    """The kernel itself (of `lib`, default this machine's) on contiguous (rows, in) float32 `x`,
    whatever `agreement_problem` says."""
    return _kernel(layer, relu, lib or library())(x)


def _kernel(layer: Int8Linear, relu: bool, lib) -> Callable[[torch.Tensor], torch.Tensor]:
    """decoding.c's `phrasal_int8_linear` of `lib` on `layer`, as a function of (rows, in) inputs."""
    out_features, in_features = layer.out_features, layer.in_features
    # The tensors themselves, not only their addresses: the function may outlive the module
    # (kernel_backend.bare_linear on a fused layer made for it).
    packed, sums, scales, bias = layer.packed, layer.sums, layer.weight_scale, layer.bias

    def apply(x: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0]
        out = torch.empty(rows, out_features)
        # Scratch per call, not per layer: searches in two threads may share the layer.
        scratch = torch.empty(scratch_bytes(rows, in_features), dtype=torch.uint8)
        lib.phrasal_int8_linear(x.data_ptr(), rows, in_features, packed.data_ptr(), sums.data_ptr(),
                                scales.data_ptr(), bias.data_ptr() if bias is not None else None, out_features,
                                int(relu), out.data_ptr(), scratch.data_ptr())
        return out

    return apply


def random_layer(in_features: int, out_features: int, generator: torch.Generator, bias: bool = True) -> Int8Linear:
    """An int8 layer of random weights (and bias) drawn from `generator`, not the global RNG."""
    weight = torch.randn(out_features, in_features, generator=generator) / in_features ** 0.5
    return Int8Linear.quantize(weight, torch.randn(out_features, generator=generator) if bias else None)
