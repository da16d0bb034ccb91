"""An exported ONNX model run by ONNX Runtime: a StepBackend for the shared beam search."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import torch

from export.artifact import ExportedDir
from export.entry_points import SOURCE, TOKENS, step_head_names
from export.onnx_target import ENCODER_FILE, STEP_FILE
from export.step_search import State, has_phrase_attention, step_out
from model.transformer import StepOut


def providers_for(device: str) -> list[str]:
    """"cpu", "cuda" or "auto" (CUDA when this onnxruntime build has it)."""
    available = ort.get_available_providers()
    if device == "cpu":
        return ["CPUExecutionProvider"]
    if "CUDAExecutionProvider" in available:
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    if device == "cuda":
        raise RuntimeError(f"device 'cuda' was asked for but this onnxruntime has no CUDA provider (it has {', '.join(available)})")
    return ["CPUExecutionProvider"]


class OnnxBackend:
    """Two ORT sessions; the state is a dict of numpy arrays, reordered with np.take outside the graphs."""

    def __init__(self, exported: ExportedDir, device: str = "cpu", threads: int = 0):
        assert exported.layout is not None, "ONNX exports carry a state layout"
        self.config = exported.config
        self.layout = exported.layout
        self.has_attention = exported.layout.has_attention
        self.has_phrase_attention = has_phrase_attention(exported.layout)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads  # 0: onnxruntime's default (one per core)
        providers = providers_for(device)
        self.encoder = ort.InferenceSession(str(exported.path / ENCODER_FILE), options, providers=providers)
        self.decoder = ort.InferenceSession(str(exported.path / STEP_FILE), options, providers=providers)
        self._state_inputs = self.layout.input_names()
        self._head = step_head_names(self.layout)  # log_probs [, attention [, phrase_attention]]
        self._step_outputs = self._head + self.layout.output_names()
        self._encoder_outputs = self.layout.output_names()

    def encode(self, src: torch.Tensor) -> State:
        outputs = self.encoder.run(self._encoder_outputs, {SOURCE: src.cpu().numpy()})
        return dict(zip(self.layout.names, outputs))

    def step(self, tokens: torch.Tensor, state: State, need_phrases: bool = False) -> StepOut:
        feed = {TOKENS: tokens.cpu().numpy()}
        feed.update({key: state[name] for key, name in zip(self._state_inputs, self.layout.names)})
        outputs = self.decoder.run(self._step_outputs, feed)
        head = [torch.from_numpy(a) for a in outputs[: len(self._head)]]
        return step_out(head, dict(zip(self.layout.names, outputs[len(self._head):])), self.layout, need_phrases)

    def reorder(self, state: State, index: torch.Tensor) -> State:
        rows = index.cpu().numpy()
        return {name: np.take(value, rows, axis=0) for name, value in state.items()}
