"""The ONNX Runtime backend: the SAME beam search as the torch backend (model/decoding/beam_search.py),
driven through an IncrementalDecoder over two ORT sessions (encoder, decoder step); the decoder
state is reordered outside the graphs (export/onnx_runner.py, export/step_search.py)."""
from __future__ import annotations

from service.runtime.base import TranslationRuntime
from service.runtime.exported import load_exported_runtimes
from service.settings import Settings


def load_runtimes(settings: Settings) -> list[TranslationRuntime]:
    return load_exported_runtimes(settings, "onnx")
