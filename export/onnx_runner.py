"""An exported ONNX model run by ONNX Runtime: a StepBackend for the shared beam search."""
from __future__ import annotations

import onnxruntime as ort
import torch

from export.exported_dir import ExportedDir
from export.entry_points import SOURCE, TOKENS, step_head_names
from export.onnx_target import ENCODER_FILE, STEP_FILE
from export.graph_backend import has_phrase_attention, initial_state, step_out
from model.decoder_state import DecoderState
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
    """Two ORT sessions; the state holds CPU torch tensors sharing memory with ORT's numpy arrays."""

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

    def encode(self, src: torch.Tensor) -> DecoderState:
        outputs = self.encoder.run(self._encoder_outputs, {SOURCE: src.cpu().numpy()})
        return initial_state([torch.from_numpy(a) for a in outputs], self.layout)

    def step(self, tokens: torch.Tensor, state: DecoderState, need_phrase_attention: bool = False) -> StepOut:
        feed = {TOKENS: tokens.cpu().numpy()}
        feed.update({key: state.tensors[name].numpy() for key, name in zip(self._state_inputs, self.layout.names)})
        outputs = [torch.from_numpy(a) for a in self.decoder.run(self._step_outputs, feed)]
        return step_out(outputs[: len(self._head)], outputs[len(self._head):], state, self.layout, need_phrase_attention)
