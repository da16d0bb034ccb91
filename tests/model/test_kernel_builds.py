"""decoding.c's vector paths other than this machine's own: the kernels built here for AVX2 + FMA
without AVX-512 (-march=haswell) and for plain x86-64 (-march=x86-64). Each gives float_linear's
stated order exactly (the by-hand FMA chains of tests/helpers.py) and the int8 layer's reference
(model/int8_linear.py) bit for bit, as the native build does (tests/model/test_kernel_backend.py, test_int8_linear.py): a
machine without AVX-512 computes the numbers the bundled models were verified with."""
from __future__ import annotations

import ctypes
import platform
import shutil
from pathlib import Path

import pytest
import torch

import model.cpu_kernels as cpu_kernels
from model.int8_linear import kernel_call, random_layer, reference
from tests.helpers import float_linear_outputs_in_stated_order

pytestmark = pytest.mark.usefixtures("one_thread")

# The build and the CPU flags it needs to run here.
BUILDS = {"haswell": ("avx2", "fma"), "x86-64": ()}


def _cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


@pytest.fixture(scope="module", params=sorted(BUILDS))
def build(request, tmp_path_factory) -> ctypes.CDLL:
    arch = request.param
    if platform.machine() != "x86_64" or not Path("/proc/cpuinfo").exists() or not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("builds for x86-64 need an x86-64 Linux machine with a C compiler")
    missing = [flag for flag in BUILDS[arch] if flag not in _cpu_flags()]
    if missing:
        pytest.skip(f"this CPU lacks {missing} to run the {arch} build")
    return cpu_kernels.build_for(arch, tmp_path_factory.mktemp(arch))


@pytest.mark.parametrize("rows", [1, 2, 5, 7, 9, 13])
def test_float_linear_sums_in_the_stated_order(build, rows):
    float_linear_outputs_in_stated_order(build, rows)


@pytest.mark.parametrize("scale", [1.0, 100.0, 1e-6])
@pytest.mark.parametrize("in_features, out_features, rows", [(128, 384, 1), (256, 128, 5), (7, 17, 3), (33, 40, 70)])
def test_the_int8_kernel_is_its_reference_bit_for_bit(build, scale, in_features, out_features, rows):
    torch.manual_seed(rows)
    x = torch.randn(rows, in_features) * scale
    for bias in (True, False):
        module = random_layer(in_features, out_features, torch.Generator().manual_seed(in_features), bias)
        for relu in (False, True):
            want = reference(x, module.weight, module.weight_scale, module.bias, relu)
            assert torch.equal(kernel_call(module, x, relu, lib=build), want), f"bias={bias} relu={relu}"
