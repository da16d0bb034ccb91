"""Exported decoder-step graphs (ONNX Runtime, TorchScript) as step backends of the one search.

A graph backend (export/onnx_runner.py, export/torchscript_runner.py) runs the encoder graph to
get the decoder's initial state, one decoder-step graph on (tokens, state), and reorders the
state by index_select on the batch dimension, outside the graph; `model.generate.generate` runs
the search over it exactly as over the eager Transformer. What the step graph returns before the
state (`export.entry_points.step_head_names`) becomes one `StepOut` here.
"""
from __future__ import annotations

from typing import Any

import torch

from export.layout import PHRASES_FROM_TOKENS, PHRASES_OUTPUT, StateLayout
from model.transformer import StepOut

State = dict[str, Any]


def has_phrase_attention(layout: StateLayout) -> bool:
    return layout.phrase_attention in (PHRASES_OUTPUT, PHRASES_FROM_TOKENS)


def step_out(head: list[Any], state: State, layout: StateLayout, need_phrases: bool) -> StepOut:
    """The graph's head outputs (log_probs [, attention [, phrase_attention]]) and new state."""
    log_probs = torch.as_tensor(head[0])
    attention = torch.as_tensor(head[1]) if len(head) > 1 else None
    phrases = None
    if need_phrases and layout.phrase_attention == PHRASES_OUTPUT:
        phrases = torch.as_tensor(head[2])  # (N, n_max, S)
    elif need_phrases:
        phrases = attention.unsqueeze(1)  # (N, 1, S): the token attention as 1-grams (DecoderLayer)
    return StepOut(log_probs, attention, phrases, state)  # type: ignore[arg-type]
