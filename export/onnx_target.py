"""ONNX build: two graphs, encoder.onnx and decoder_step.onnx, through torch.onnx's dynamo exporter.

torch 2.13's `torch.onnx.export` defaults to the torch.export-based exporter, which needs the
`onnxscript` package (the legacy TorchScript exporter, dynamo=False, still works but is
deprecated). Batch, source length and the self-attention cache length are dynamic; every other
state dimension (heads, head size, n-gram window rows) is static. Example inputs use sizes >= 2
and a non-empty cache because torch.export specialises sizes 0 and 1; the graph still runs with
an empty cache at step 0 (tested). fp16 graphs are the same export of a half-precision copy: the
step's log-probs and attention stay float32 because the model computes them in float32.
Ops whose default lowering is not deterministic in ONNX Runtime get our own translation
(export/onnx_ops.py: index_add, which QueryK uses, as ScatterElements instead of a racing ScatterND).
"""
from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

import torch
from torch.export import Dim

from model.transformer import Transformer
from export.entry_points import DecoderStepEntry, EncoderEntry, encoder_io_names, example_inputs, step_io_names
from export.layout import BATCH, PAST, SOURCE, StateLayout
from export.onnx_ops import TRANSLATIONS

ENCODER_FILE = "encoder.onnx"
STEP_FILE = "decoder_step.onnx"


def _dims(config_max_positions: int) -> dict[str, Dim]:
    # The sinusoid table bounds both lengths; the last position is kept for EOS, so the cache
    # (positions already decoded) holds at most max_positions - 1 rows.
    return {
        BATCH: Dim(BATCH),
        SOURCE: Dim(SOURCE, max=config_max_positions),
        PAST: Dim(PAST, min=0, max=config_max_positions - 1),
    }


def _export(module: torch.nn.Module, args: tuple, path: Path, dynamic_shapes: Any, names: tuple[list[str], list[str]], opset: int | None) -> None:
    # The exporter logs a line per missing optional library (torchvision); keep the CLI readable.
    quiet = logging.getLogger("torch.onnx")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            # Deprecation chatter from torch's own pytree use, and notes that equal axes share one name.
            warnings.simplefilter("ignore", FutureWarning)
            warnings.filterwarnings("ignore", message=r".*The axis name: .* will not be used", category=UserWarning)
            torch.onnx.export(
                module.eval(), args, str(path), dynamo=True, external_data=False, verbose=False,
                dynamic_shapes=dynamic_shapes, input_names=names[0], output_names=names[1], opset_version=opset,
                custom_translation_table=TRANSLATIONS,
            )
    finally:
        quiet.setLevel(level)


def build_onnx(model: Transformer, layout: StateLayout, out_dir: Path, opset: int | None = None) -> dict[str, Any]:
    """Write encoder.onnx and decoder_step.onnx for `model` (already in the dtype to export)."""
    import onnx

    dims = _dims(model.config.max_positions)
    encoder_args, step_args = example_inputs(model, layout)
    encoder_shapes = ({0: dims[BATCH], 1: dims[SOURCE]},)
    state_shapes = tuple({d: dims[axis] for d, axis in layout.axes[name].items()} for name in layout.names)
    _export(EncoderEntry(model, layout), encoder_args, out_dir / ENCODER_FILE, encoder_shapes, encoder_io_names(layout), opset)
    _export(DecoderStepEntry(model, layout), step_args, out_dir / STEP_FILE, ({0: dims[BATCH]}, state_shapes), step_io_names(layout), opset)
    opsets = {entry.domain or "ai.onnx": entry.version for entry in onnx.load(str(out_dir / STEP_FILE), load_external_data=False).opset_import}
    return {"files": [ENCODER_FILE, STEP_FILE], "opset": opsets.get("ai.onnx"), "exporter": "torch.onnx.export(dynamo=True)"}
