"""Load the runtime that serves one directory, by backend. Engines are imported only for the
backend chosen (inside the loaders), so this file imports none.

- "torch": a model directory, decoded eagerly, through the C kernels or on static state
  (service/runtime/torch_runtime.py).
- "onnx", "torchscript": an export's encoder and decoder-step graphs (ONNX Runtime sessions, or
  traced modules loaded with torch.jit.load) driven by the same beam search as "torch"
  (model/decoding/beam_search.py), the decoder state reordered outside the graphs
  (export/onnx_runner.py, export/torchscript_runner.py, export/graph_backend.py).
- "ct2": CTranslate2's own C++ beam search with our options mapped onto it (beam size, n-best,
  length penalty with the same normalisation; one `translate_batch` per batch, whose length
  limit is the batch's longest per-sentence one); token alignments from the attention it
  returns (export/ct2_runner.py).

The three export backends share one runtime class (service/runtime/exported.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from service.runtime.base import DecodingOptions, TranslationRuntime

EXPORT_BACKENDS = ("onnx", "torchscript", "ct2")
BACKENDS = ("torch", *EXPORT_BACKENDS)


@dataclass(frozen=True)
class RuntimeSpec:
    """Everything loading one runtime needs: which engine, which directory (a model directory
    for "torch", an export for the others), on which device ("auto", "cpu" or "cuda")."""

    backend: str
    path: Path
    device: str = "auto"
    # Backend "torch" only, by keyword (two strings side by side are easy to swap):
    # STATIC_DECODING ("auto", "on", "off"), CPU_QUANTIZATION ("auto", "none", "int8") and CPU_KERNELS
    # ("auto", "off"); Settings checks them.
    static_decoding: str = field(default="auto", kw_only=True)
    cpu_quantization: str = field(default="auto", kw_only=True)
    cpu_kernels: str = field(default="auto", kw_only=True)
    # The decoding options of a request that sets none (Settings.decoding): what warm-up prepares.
    decoding: DecodingOptions = field(default_factory=DecodingOptions, kw_only=True)


def load_runtime(spec: RuntimeSpec) -> TranslationRuntime:
    if spec.backend == "torch":
        from service.runtime.torch_runtime import load_runtime as load_torch_runtime

        return load_torch_runtime(spec.path, spec.device, static_decoding=spec.static_decoding,
                                  cpu_quantization=spec.cpu_quantization, cpu_kernels=spec.cpu_kernels,
                                  decoding=spec.decoding)
    if spec.backend in EXPORT_BACKENDS:
        from service.runtime.exported import load_exported_runtime

        return load_exported_runtime(spec.path, spec.device, spec.backend)
    raise ValueError(f"unknown backend {spec.backend!r}; known: {', '.join(BACKENDS)}")
