"""The two entry points every graph export has: the encoder and one decoder step.

Both are thin modules over the eager Transformer, positional in and out so that tracers and
exporters see plain tensors: the encoder maps src (B, S) to the decoder's initial state (so the
runtime never needs the model's `init_state`), and the step maps (tokens (N,), *state) to
(log_probs (N, V) float32, [attention (N, S) float32,] [phrase_attention (N, n_max, S) float32,]
*new state), in `StateLayout.names` order. The phrase attention is an output only when the layout
says so (`PHRASES_OUTPUT`): `decode_step(..., need_phrase_attention=True)` takes the same numerical path
as without it plus the alignment layer's phrase table, so one graph serves searches with and
without phrase alignments.
Beam reordering stays outside: every state tensor is batch-first, so the caller index_selects.
"""
from __future__ import annotations

import torch
from torch import nn

from model.decoder_state import DecoderState
from model.transformer import Transformer
from export.layout import PHRASES_OUTPUT, StateLayout, probe_source

TOKENS = "tokens"
SOURCE = "src"
LOG_PROBS = "log_probs"
ATTENTION = "attention"
PHRASE_ATTENTION = "phrase_attention"


class EncoderEntry(nn.Module):
    def __init__(self, model: Transformer, layout: StateLayout):
        super().__init__()
        self.model = model
        self.names = list(layout.names)

    def forward(self, src: torch.Tensor) -> tuple[torch.Tensor, ...]:
        state = self.model.init_state(self.model.encode(src))
        return tuple(state.tensors[name] for name in self.names)


class DecoderStepEntry(nn.Module):
    def __init__(self, model: Transformer, layout: StateLayout):
        super().__init__()
        self.model = model
        self.names = list(layout.names)
        self.has_attention = layout.has_attention
        self.need_phrase_attention = layout.phrase_attention == PHRASES_OUTPUT

    def forward(self, tokens: torch.Tensor, *state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.model.decode_step(tokens, DecoderState(dict(zip(self.names, state))), need_phrase_attention=self.need_phrase_attention)
        if self.need_phrase_attention:
            head: tuple[torch.Tensor, ...] = (out.log_probs, out.attention, out.phrase_attention)
        else:
            head = (out.log_probs, out.attention) if self.has_attention else (out.log_probs,)
        return head + tuple(out.state.tensors[name] for name in self.names)


def step_head_names(layout: StateLayout) -> list[str]:
    """The step's outputs before the state, in order."""
    if layout.phrase_attention == PHRASES_OUTPUT:
        return [LOG_PROBS, ATTENTION, PHRASE_ATTENTION]
    return [LOG_PROBS, ATTENTION] if layout.has_attention else [LOG_PROBS]


def encoder_io_names(layout: StateLayout) -> tuple[list[str], list[str]]:
    return [SOURCE], layout.output_names()


def step_io_names(layout: StateLayout) -> tuple[list[str], list[str]]:
    return [TOKENS] + layout.input_names(), step_head_names(layout) + layout.output_names()


@torch.no_grad()  # not inference_mode: tracers refuse inference tensors as inputs
def example_inputs(model: Transformer, layout: StateLayout, batch: int = 2, length: int = 5, steps: int = 3):
    """Example (src,) and (tokens, *state) for tracing: sizes >= 2 everywhere, a non-empty cache."""
    src = probe_source(model, batch, length)
    state = model.init_state(model.encode(src))
    tokens = torch.full((batch,), model.config.bos_id, dtype=torch.long, device=src.device)
    for _ in range(steps):
        out = model.decode_step(tokens, state)
        state, tokens = out.state, out.log_probs.argmax(dim=-1)
    return (src,), (tokens, *[state.tensors[name].clone() for name in layout.names])
