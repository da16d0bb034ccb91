"""The Transformer's decoding step through torch.compile, for the static search.

On a GPU a small model's step is a long chain of small kernels (the bundled model's static step
dispatches ~160 operators at beam 5: projections, norms, residual adds, attention, the caches'
append and reorder, the beam choice); a CUDA graph (model/decoding/cuda_graph_step.py) launches them
with one call, but still runs them one after the other, each a few microseconds whatever its size.
Inductor fuses the model step's elementwise operators into the kernels around them, so each replay
runs fewer (the beam choice and the reorder stay as they are). Compiled with dynamic shapes, one
compiled step serves every batch bucket, source width and step count of
`model/decoding/static_decoding.py`; the compiling happens at the first step (the static search's
warm-up on a GPU), and the graphs capture the compiled kernels as they capture eager ones. An option
to measure (`benchmarks/engines.py` engines `torch-static-compiled`, `torch-fp16-graphs-compiled`;
`STEPS=compiled bash benchmarks/gpu/serving.sh`), not what the service runs.
"""
from __future__ import annotations

from collections.abc import Callable

import torch

from model.decoder_state import DecoderState
from model.decoding.generate import TransformerBackend
from model.transformer import StepOut, Transformer


class CompiledStepBackend(TransformerBackend):
    """`TransformerBackend` whose step is `model.decode_step` through torch.compile (`compiler`: a
    torch.compile backend, its name or a function; tests hand it one that runs the traced graph as it is)."""

    def __init__(self, model: Transformer, compiler: str | Callable = "inductor"):
        super().__init__(model)
        self._step = torch.compile(model.decode_step, dynamic=True, backend=compiler)

    def step(self, tokens: torch.Tensor, state: DecoderState, need_phrase_attention: bool = False,
             need_supervised: bool = False) -> StepOut:
        return self._step(tokens, state, need_phrase_attention, need_supervised)
