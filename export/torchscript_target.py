"""TorchScript build: the encoder and the decoder step traced into encoder.pt and decoder_step.pt.

Tracing, not scripting: the model's Python (dicts of state, dataclasses, the attention registry)
is outside TorchScript's subset, while a trace records exactly the tensor program that runs.
Shapes stay symbolic in the trace (sizes read from tensors are recorded as size ops), so the
saved modules accept any batch, source length and cache length; Python control flow is fixed at
trace time, which is why verification runs on real sentences after every export. Tracer warnings
are collected into the manifest. Devices used while tracing (e.g. for the empty cache) are baked
in, so a module traced on the CPU runs on the CPU: trace with --device cuda for a GPU export.
The saved files load with torch.jit.load alone, without this project's code.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch

from model.transformer import Transformer
from export.entry_points import DecoderStepEntry, EncoderEntry, example_inputs
from export.layout import StateLayout

ENCODER_FILE = "encoder.pt"
STEP_FILE = "decoder_step.pt"


def build_torchscript(model: Transformer, layout: StateLayout, out_dir: Path) -> dict[str, Any]:
    """Trace and save both entry points of `model` (already in the dtype and on the device to export)."""
    encoder_args, step_args = example_inputs(model, layout)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always", torch.jit.TracerWarning)
        encoder = torch.jit.trace(EncoderEntry(model, layout).eval(), encoder_args, check_trace=False)
        step = torch.jit.trace(DecoderStepEntry(model, layout).eval(), step_args, check_trace=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch 2.13 deprecates TorchScript (report)
        torch.jit.save(encoder, str(out_dir / ENCODER_FILE))
        torch.jit.save(step, str(out_dir / STEP_FILE))
    tracer_warnings = sorted({str(w.message).split("\n")[0] for w in caught if issubclass(w.category, torch.jit.TracerWarning)})
    return {"files": [ENCODER_FILE, STEP_FILE], "tracer_warnings": tracer_warnings}
