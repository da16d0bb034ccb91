"""Load the runtime that serves one directory. ``RuntimeSpec.backend`` names the module whose
``load_runtime(path, device)`` builds it; engines are imported only for the backend chosen, so
this file imports none."""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path

from service.runtime.base import TranslationRuntime

BACKEND_MODULES = {
    "torch": "service.runtime.torch_runtime",
    "onnx": "service.runtime.onnx_runtime",
    "torchscript": "service.runtime.torchscript_runtime",
    "ct2": "service.runtime.ct2_runtime",
}


@dataclass(frozen=True)
class RuntimeSpec:
    """Everything loading one runtime needs: which engine, which directory (a model directory
    for "torch", an export for the others), on which device ("auto", "cpu" or "cuda")."""

    backend: str
    path: Path
    device: str = "auto"
    # Backend "torch" only, by keyword (two strings side by side are easy to swap):
    # STATIC_DECODING ("auto", "on", "off"), CPU_QUANTIZATION ("none", "int8") and CPU_KERNELS
    # ("auto", "off"); Settings checks them.
    static_decoding: str = field(default="auto", kw_only=True)
    cpu_quantization: str = field(default="none", kw_only=True)
    cpu_kernels: str = field(default="auto", kw_only=True)


def load_runtime(spec: RuntimeSpec) -> TranslationRuntime:
    module = BACKEND_MODULES.get(spec.backend)
    if module is None:
        raise ValueError(f"unknown backend {spec.backend!r}; known: {', '.join(BACKEND_MODULES)}")
    options = {"static_decoding": spec.static_decoding, "cpu_quantization": spec.cpu_quantization,
               "cpu_kernels": spec.cpu_kernels} if spec.backend == "torch" else {}
    return importlib.import_module(module).load_runtime(spec.path, spec.device, **options)
