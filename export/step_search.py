"""The SAME beam search as eager PyTorch (model.beam_search), driven through an exported step.

A `StepBackend` wraps an engine session (ONNX Runtime, TorchScript): it runs the encoder graph
to get the decoder's initial state, one decoder step on (tokens, state), and reorders the state
for the search by index_select on the batch dimension, outside the graph. Everything else (beam
expansion, max lengths, never generating PAD/BOS) mirrors `model.generate.generate` exactly,
phrase attention included: the attention rows the search carries are [token | phrase table] as in
`model.generate.TransformerStepDecoder`, split into `PhrasalHypothesis` at the end.
"""
from __future__ import annotations

from typing import Any, Protocol

import torch

from model.beam_search import Hypothesis, beam_search
from model.config import ModelConfig
from model.generate import SearchOptions, _split_rows, max_lengths, pad_sources
from export.layout import PHRASES_FROM_TOKENS, PHRASES_OUTPUT

State = dict[str, Any]


class StepBackend(Protocol):
    config: ModelConfig
    has_attention: bool
    phrase_attention: str  # export.layout.PHRASES_*: how this export gives the phrase attention

    def encode(self, src: torch.Tensor) -> State:
        """src (B, S) int64 -> the decoder's initial state, by name."""
        ...

    def step(self, tokens: torch.Tensor, state: State) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None, State]:
        """tokens (N,) -> log-probs (N, V) float32 CPU tensor, attention (N, S) or None, phrase
        attention (N, n_max, S) (PHRASES_OUTPUT exports) or None, new state."""
        ...

    def reorder(self, state: State, index: torch.Tensor) -> State:
        """Keep rows `index` of every state tensor (batch-first), in that order."""
        ...


def has_phrase_attention(backend: StepBackend) -> bool:
    return backend.phrase_attention in (PHRASES_OUTPUT, PHRASES_FROM_TOKENS)


class StepDecoder:
    """`model.beam_search.IncrementalDecoder` over a StepBackend: the state lives here.

    With phrases=True every attention row is [token attention (S) | phrase attention (n_max·S)],
    as `model.generate.TransformerStepDecoder` lays it out.
    """

    def __init__(self, backend: StepBackend, state: State, phrases: bool = False):
        self.backend = backend
        self.state = state
        self.phrases = phrases
        self._never = [backend.config.pad_id, backend.config.bos_id]

    def step(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        log_probs, attention, phrases, self.state = self.backend.step(tokens, self.state)
        # Padding and BOS are inputs only: never generate them (as TransformerStepDecoder).
        log_probs[:, self._never] = float("-inf")
        if self.phrases:
            attention = torch.as_tensor(attention)
            # A model whose phrase table is its token attention as 1-grams (DecoderLayer.step).
            table = attention.unsqueeze(1) if phrases is None else torch.as_tensor(phrases)  # (N, n_max, S)
            attention = torch.cat([attention, table.flatten(1)], dim=1)  # (N, S + n_max·S)
        return log_probs, attention

    def reorder(self, index: torch.Tensor) -> None:
        self.state = self.backend.reorder(self.state, index)


@torch.inference_mode()
def generate_with(backend: StepBackend, src: torch.Tensor, options: SearchOptions) -> list[list[Hypothesis]]:
    """Beam search over a padded source batch (B, S), as `model.generate.generate` does eagerly."""
    if options.return_attention and not backend.has_attention:
        raise ValueError("this export returns no attention, so it cannot give alignments")
    phrases = options.return_phrase_attention
    if phrases and not has_phrase_attention(backend):
        raise ValueError("this export returns no phrase attention, so it cannot give phrase alignments")
    config = backend.config
    k = options.beam_size
    rows = torch.arange(src.shape[0]).repeat_interleave(k)  # (B*K,) sentence-major
    # The initial state is row-wise in the source, so expanding it equals encoding every beam's copy.
    decoder = StepDecoder(backend, backend.reorder(backend.encode(src), rows), phrases=phrases)
    limit = config.max_positions - 1  # the last position is kept for EOS
    found = beam_search(
        decoder,
        batch_size=src.shape[0],
        beam_size=k,
        bos_id=config.bos_id,
        eos_id=config.eos_id,
        max_lengths=max_lengths(src, config.pad_id, options, limit),
        n_best=options.n_best,
        length_penalty=options.length_penalty,
        return_attention=options.return_attention or phrases,
    )
    if not phrases:
        return found
    return [[_split_rows(h, src.shape[1], options.return_attention) for h in nbest] for nbest in found]


def generate_ids(backend: StepBackend, sources: list[list[int]], options: SearchOptions) -> list[list[Hypothesis]]:
    """Sources are piece ids without EOS; the model reads pieces + EOS, right-padded."""
    config = backend.config
    return generate_with(backend, pad_sources([ids + [config.eos_id] for ids in sources], config.pad_id), options)
