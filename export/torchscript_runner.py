"""An exported TorchScript model: a StepBackend for the shared beam search (torch.jit.load only)."""
from __future__ import annotations

import warnings

import torch

from export.exported_dir import ExportedDir
from model.attention.kernels import avoid_per_shape_attention_plans
from export.entry_points import step_head_names
from export.graph_backend import has_phrase_attention, initial_state, step_out
from model.decoder_state import DecoderState
from model.transformer import StepOut
from export.torchscript_target import ENCODER_FILE, STEP_FILE


class TorchScriptBackend:
    def __init__(self, exported: ExportedDir, device: str | torch.device = "cpu"):
        assert exported.layout is not None, "TorchScript exports carry a state layout"
        self.config = exported.config
        self.layout = exported.layout
        self.has_attention = exported.layout.has_attention
        self.has_phrase_attention = has_phrase_attention(exported.layout)
        self._heads = len(step_head_names(exported.layout))  # log_probs [, attention [, phrase_attention]]
        self.device = torch.device(device)
        avoid_per_shape_attention_plans(self.device)  # the graphs call scaled_dot_product_attention
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # torch 2.13 deprecates TorchScript
            self.encoder = torch.jit.load(str(exported.path / ENCODER_FILE), map_location=self.device).eval()
            self.decoder = torch.jit.load(str(exported.path / STEP_FILE), map_location=self.device).eval()

    def encode(self, src: torch.Tensor) -> DecoderState:
        with torch.inference_mode(), torch.jit.optimized_execution(False):
            return initial_state(list(self.encoder(src.to(self.device))), self.layout)

    def step(self, tokens: torch.Tensor, state: DecoderState, need_phrase_attention: bool = False) -> StepOut:
        # The profiling executor re-specialises the graph for every new cache length; without it
        # the trace runs as recorded (measured faster on CPU, and the same numbers).
        with torch.inference_mode(), torch.jit.optimized_execution(False):
            outputs = self.decoder(tokens.to(self.device), *[state.tensors[name] for name in self.layout.names])
        return step_out(list(outputs[: self._heads]), list(outputs[self._heads:]), state, self.layout, need_phrase_attention)
