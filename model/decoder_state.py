"""Decoding state as explicit data: batch-first tensors, reordered by index_select where a step changes them."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Memory:
    """Encoder output for a batch: states (B, S, D) and pad_mask (B, S), True at padding.

    With attentive phrase representations (model/phrase_representation/functional.py) also
    `phrase_representations` (B, K, S, D), the phrase representations of the K = encoder_layers + 1 encoder-side representations
    at each chunk start, and `phrase_chunks` (B, S) int64, the segmentation: the length of the
    chunk starting at j, 0 where none starts. Both are None otherwise.
    """

    states: torch.Tensor
    pad_mask: torch.Tensor
    phrase_representations: torch.Tensor | None = None
    phrase_chunks: torch.Tensor | None = None

    def reorder(self, index: torch.Tensor) -> "Memory":
        def pick(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.index_select(0, index)

        return Memory(pick(self.states), pick(self.pad_mask), pick(self.phrase_representations), pick(self.phrase_chunks))


@dataclass(frozen=True)
class DecoderState:
    """Everything incremental decoding needs between steps, keyed by flat names.

    The flat names (e.g. "layers.0.self.k") are also the named inputs and outputs of exported
    decoder-step graphs; every tensor has N rows first, sentence-major in groups of `rows_per_sentence`
    rows (row b·K + k is beam k of sentence b). "position" (N,) int64 counts the tokens decoded.

    `sentence` names the per-sentence tensors: computed once from the source (the
    cross-attention's projected memory, the source mask, the phrase memory), equal on every beam
    of a sentence, and passed through unchanged by a step. A beam reorder copies only the
    per-beam tensors; the per-sentence ones are kept as they are while every group of K rows
    still holds the same sentence, and re-gathered by sentence only when sentences leave the
    batch. They are materialised at N rows once by `expand` rather than broadcast at use,
    because a broadcast changes how the attention kernels group their sums, hence the floats.
    """

    tensors: dict[str, torch.Tensor]
    sentence: frozenset[str] = frozenset()
    rows_per_sentence: int = 1

    def expand(self, rows_per_sentence: int) -> "DecoderState":
        """B rows -> B·rows_per_sentence rows, sentence-major: every row repeated rows_per_sentence times."""
        rows = torch.arange(self.rows(), device=self.device()).repeat_interleave(rows_per_sentence)  # (B*K,)
        return DecoderState({name: t.index_select(0, rows) for name, t in self.tensors.items()}, self.sentence, rows_per_sentence)

    def reorder(self, index: torch.Tensor) -> "DecoderState":
        """Keep rows `index` (N',) of the N rows, in that order (beam search's parent rows)."""
        rows = sentence_rows(index, self.rows_per_sentence, self.rows())
        return DecoderState(
            {
                name: t.index_select(0, index) if name not in self.sentence else t if rows is None else t.index_select(0, rows)
                for name, t in self.tensors.items()
            },
            self.sentence,
            self.rows_per_sentence,
        )

    def layer(self, prefix: str) -> dict[str, torch.Tensor]:
        start = len(prefix) + 1
        return {name[start:]: t for name, t in self.tensors.items() if name.startswith(prefix + ".")}

    def rows(self) -> int:
        return next(iter(self.tensors.values())).shape[0]

    def device(self) -> torch.device:
        return next(iter(self.tensors.values())).device


def sentence_rows(index: torch.Tensor, rows_per_sentence: int, rows: int) -> torch.Tensor | None:
    """The rows to take of a per-sentence tensor (rows equal within each group of rows_per_sentence) when
    the state is reordered by `index`; None when it stays as it is.

    Where every new group of rows_per_sentence rows comes from one old group (what beam search does),
    that group's rows, in order; otherwise `index` itself, which is always right.
    """
    k = rows_per_sentence
    if k > 1 and index.numel() % k == 0:
        groups = index[::k] // k  # (N'/K,) the old group of each new group
        if torch.equal(index // k, groups.repeat_interleave(k)):
            index = (groups.unsqueeze(1) * k + torch.arange(k, device=index.device)).flatten()  # (N',)
    if index.numel() == rows and torch.equal(index, torch.arange(rows, device=index.device)):
        return None
    return index
