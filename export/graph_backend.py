"""Exported decoder-step graphs (ONNX Runtime, TorchScript) as step backends of the one search.

A graph backend (export/onnx_runner.py, export/torchscript_runner.py) runs the encoder graph to
get the decoder's initial state and one decoder-step graph on (tokens, state); the state is a
`DecoderState` of torch tensors under the graphs' flat names, which expands to the beams and
reorders itself outside the graphs (model/decoder_state.py), and `model.decoding.generate.generate` runs the
search over it exactly as over the eager Transformer. What the step graph returns before the
state (`export.entry_points.step_head_names`) becomes one `StepOut` here.
"""
from __future__ import annotations

from typing import Any

import torch

from export.layout import PHRASES_FROM_TOKENS, PHRASES_OUTPUT, StateLayout
from model.decoder_state import DecoderState
from model.transformer import StepOut


def has_phrase_attention(layout: StateLayout) -> bool:
    return layout.phrase_attention in (PHRASES_OUTPUT, PHRASES_FROM_TOKENS)


def initial_state(outputs: list[torch.Tensor], layout: StateLayout) -> DecoderState:
    """The encoder graph's outputs, in layout order, as the decoder's initial state."""
    return DecoderState(dict(zip(layout.names, outputs)), frozenset(layout.sentence))


def step_out(head: list[Any], outputs: list[torch.Tensor], state: DecoderState, layout: StateLayout, need_phrase_attention: bool) -> StepOut:
    """The graph's head outputs (log_probs [, attention [, phrase_attention]]) and state outputs,
    in layout order, after a step from `state`. The per-sentence tensors come back unchanged, so
    the runner keeps its own (the ones its reorders keep apart, model/decoder_state.py)."""
    tensors = {name: state.tensors[name] if name in state.sentence else t for name, t in zip(layout.names, outputs)}
    new_state = DecoderState(tensors, state.sentence, state.rows_per_sentence)
    log_probs = torch.as_tensor(head[0])
    attention = torch.as_tensor(head[1]) if len(head) > 1 else None
    phrase_attention = None
    if need_phrase_attention and layout.phrase_attention == PHRASES_OUTPUT:
        phrase_attention = torch.as_tensor(head[2])  # (N, n_max, S)
    elif need_phrase_attention:
        phrase_attention = attention.unsqueeze(1)  # (N, 1, S): the token attention as 1-grams (DecoderLayer)
    return StepOut(log_probs, attention, phrase_attention, new_state)
