"""Decoding state as explicit data: every tensor is batch-first, so reordering is one index_select."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Memory:
    """Encoder output for a batch: states (B, S, D) and pad_mask (B, S), True at padding.

    With attentive phrase representations (model/phrase_representation.py) also `phrases`
    (B, K, S, D), the phrase vectors of the K = encoder_layers + 1 encoder-side representations
    at each chunk start, and `phrase_chunks` (B, S) int64, the segmentation: the length of the
    chunk starting at j, 0 where none starts. Both are None otherwise.
    """

    states: torch.Tensor
    pad_mask: torch.Tensor
    phrases: torch.Tensor | None = None
    phrase_chunks: torch.Tensor | None = None

    def reorder(self, index: torch.Tensor) -> "Memory":
        def pick(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.index_select(0, index)

        return Memory(pick(self.states), pick(self.pad_mask), pick(self.phrases), pick(self.phrase_chunks))


@dataclass(frozen=True)
class DecoderState:
    """Everything incremental decoding needs between steps, keyed by flat names.

    The flat names (e.g. "layers.0.self.k") are also the named inputs and outputs of exported
    decoder-step graphs. "memory_pad_mask" is (N, S); every other tensor has N rows first.
    """

    tensors: dict[str, torch.Tensor]

    def reorder(self, index: torch.Tensor) -> "DecoderState":
        return DecoderState({name: t.index_select(0, index) for name, t in self.tensors.items()})

    def layer(self, prefix: str) -> dict[str, torch.Tensor]:
        start = len(prefix) + 1
        return {name[start:]: t for name, t in self.tensors.items() if name.startswith(prefix + ".")}
