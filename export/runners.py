"""One way to run any exported directory: `open_runner(path).generate(source_ids, options)`.

Used by the exporter's verification and by the service's backends alike, so that what was
verified is what is served. ONNX and TorchScript exports run the shared beam search
(`model.decoding.generate.generate`); CTranslate2 runs its own. Engines are imported only when asked for.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from model.decoding.beam_search import Hypothesis
from model.decoding.generate import StepBackend, generate_ids
from model.decoding.options import DecodingOptions
from export.exported_dir import ExportedDir, read_export_dir
from export.layout import PHRASES_OUTPUT


class Runner(Protocol):
    exported: ExportedDir
    has_attention: bool  # can return attention rows, hence token alignments
    has_phrase_attention: bool  # can return the phrase attention (DecodingOptions.return_phrase_attention)
    is_phrasal: bool  # that phrase attention is the model's own (n-grams, chunks), not its token attention

    def generate(self, sources: list[list[int]], options: DecodingOptions,
                 should_stop: Callable[[], bool] | None = None) -> list[list[Hypothesis]]:
        """Sources are piece ids without EOS; n-best hypotheses per source, best first; raises
        SearchCancelled once should_stop() is true (asked between decoding steps)."""
        ...


class GraphExportRunner:
    """A graph export (ONNX, TorchScript) driven by the same beam search as eager PyTorch."""

    def __init__(self, exported: ExportedDir, backend: StepBackend):
        self.exported = exported
        self.backend = backend
        self.has_attention = backend.has_attention
        self.has_phrase_attention = backend.has_phrase_attention
        self.is_phrasal = exported.layout.phrase_attention == PHRASES_OUTPUT

    def generate(self, sources: list[list[int]], options: DecodingOptions,
                 should_stop: Callable[[], bool] | None = None) -> list[list[Hypothesis]]:
        return generate_ids(self.backend, sources, options, should_stop)


def torchscript_device(exported: ExportedDir, device: str) -> str:
    """A trace bakes in the device it ran on (export.torchscript_target), so it decides."""
    traced_on = exported.options.get("device", "cpu")
    if device not in ("auto", traced_on):
        raise RuntimeError(
            f"{exported.path} was traced for {traced_on!r} and cannot run on {device!r}; "
            f"re-export it with --device {device}"
        )
    return traced_on


def open_runner(source: str | Path | ExportedDir, device: str = "cpu", target: str | None = None, threads: int = 0) -> Runner:
    """Check (sha256, target, verification) and load an exported directory; device: cpu, cuda, auto."""
    exported = source if isinstance(source, ExportedDir) else read_export_dir(source, target)
    if exported.target == "onnx":
        from export.onnx_runner import OnnxBackend

        return GraphExportRunner(exported, OnnxBackend(exported, device, threads))
    if exported.target == "torchscript":
        from export.torchscript_runner import TorchScriptBackend

        return GraphExportRunner(exported, TorchScriptBackend(exported, torchscript_device(exported, device)))
    if exported.target == "ct2":
        from export.ct2_runner import Ct2Runner

        return Ct2Runner(exported, device, threads)
    raise ValueError(f"unknown export target {exported.target!r}")
