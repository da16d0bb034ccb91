"""The CTranslate2 backend: CTranslate2's own C++ beam search with our options mapped onto it
(beam size, n-best, length penalty with the same normalisation; one `translate_batch` per batch,
whose length limit is the batch's longest per-sentence one); token alignments from the attention
it returns (export/ct2_runner.py)."""
from __future__ import annotations

from pathlib import Path

from service.runtime.exported import ExportedRuntime, load_exported_runtime


def load_runtime(path: Path, device: str = "auto") -> ExportedRuntime:
    return load_exported_runtime(path, device, "ct2")
