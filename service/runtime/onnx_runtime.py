"""The ONNX Runtime backend: the SAME beam search as the torch backend (model/decoding/beam_search.py),
driven through an IncrementalDecoder over two ORT sessions (encoder, decoder step); the decoder
state is reordered outside the graphs (export/onnx_runner.py, export/step_search.py)."""
from __future__ import annotations

from pathlib import Path

from service.runtime.exported import ExportedRuntime, load_exported_runtime


def load_runtime(path: Path, device: str = "auto") -> ExportedRuntime:
    return load_exported_runtime(path, device, "onnx")
