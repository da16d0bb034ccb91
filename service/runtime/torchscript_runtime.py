"""The TorchScript backend: the SAME beam search as the torch backend (model/decoding/beam_search.py),
driven through an IncrementalDecoder over the traced encoder and decoder step, loaded with
torch.jit.load alone (export/torchscript_runner.py, export/step_search.py)."""
from __future__ import annotations

from pathlib import Path

from service.runtime.exported import ExportedRuntime, load_exported_runtime


def load_runtime(path: Path, device: str = "auto") -> ExportedRuntime:
    return load_exported_runtime(path, device, "torchscript")
