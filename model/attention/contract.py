"""The contract between a layer and its attention kinds: what every kind computes and returns.

A kind is an `nn.Module` registered by name (model/attention/registry.py) and built as
`cls(d_model, n_heads, dropout, site, options)`. Its full pass and its decoding step return
one `AttentionOut`; what a kind can do beyond plain attention is declared on the class (the
`AttentionKind` defaults), never probed for with `hasattr`:

- `phrase_sizes`: > 0 when the kind, at this site, scores source n-grams of sizes 1..phrase_sizes
  and can return their table (`AttentionOut.phrase_attention`); 0 otherwise.
- `token_level`: True when the kind exposes `token_logits(x, state)` and `mix(probs, state)`,
  the two halves of token attention that the structural alignment biases (model/biases) add
  their terms between.
- `validate_for_model(options, site, *, d_model, n_heads)`: problems that depend on the model's
  size, asked once `validate_options` found none.
- `export_problems(target, options, site)`: why this kind cannot be exported to `target`
  ("onnx", "torchscript", "ct2"); empty when it can.
- `sentence_state()`: the names in `init_state`'s state that come from the source alone and that
  `step` passes through unchanged (the cross-attention's projected memory): the same for every
  beam of a sentence, so a beam reorder need not copy them (model/decoder_state.py). Empty by default:
  then every tensor is treated as per beam, which is always right.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import torch
from torch import nn

State = dict[str, torch.Tensor]


@dataclass(frozen=True)
class AttentionOut:
    """What an attention kind (and a decoder layer around it) returns.

    out: (B, T, D) the sublayer's output; probs: (B, H, T, S) per-head probabilities when asked
    (a phrasal kind spreads each n-gram's weight over its tokens); phrase_attention: (B, H, T, n_max, S)
    when asked of a kind with phrase_sizes > 0, [.., n-1, j] = weight of the source n-gram
    starting at j of length n; state: the new decoding state after an incremental step (None
    for a full pass).
    """

    out: torch.Tensor
    probs: torch.Tensor | None = None
    phrase_attention: torch.Tensor | None = None
    state: State | None = None


class AttentionKind(Protocol):
    """What `DecoderLayer` / `EncoderLayer` call on an attention kind."""

    phrase_sizes: int
    token_level: ClassVar[bool]

    @staticmethod
    def validate_options(options: dict[str, Any], site: str) -> list[str]: ...

    @classmethod
    def validate_for_model(cls, options: dict[str, Any], site: str, *, d_model: int, n_heads: int) -> list[str]: ...

    @staticmethod
    def export_problems(target: str, options: dict[str, Any], site: str) -> list[str]: ...

    def __call__(
        self, x: torch.Tensor, memory: torch.Tensor | None = None, *,
        key_padding_mask: torch.Tensor | None = None, causal: bool = False,
        need_weights: bool = False, need_phrase_attention: bool = False,
    ) -> AttentionOut:
        """x (B, T, D) queries; memory (B, S, D) keys/values for cross-attention, else x itself.
        need_phrase_attention implies need_weights."""
        ...

    def init_state(self, memory: torch.Tensor | None, batch_size: int, device: torch.device, dtype: torch.dtype) -> State:
        """Cross-attention: the memory projected once; self-attention: empty caches. Batch-first."""
        ...

    def sentence_state(self) -> frozenset[str]: ...

    def step(
        self, x: torch.Tensor, state: State, *, key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = False, need_phrase_attention: bool = False,
    ) -> AttentionOut:
        """x (N, 1, D) -> AttentionOut with out (N, 1, D), probs (N, H, 1, S) when asked, new state."""
        ...


class AttentionModule(nn.Module):
    """Base of the registered kinds: the declared capabilities default to "none"."""

    phrase_sizes: int = 0
    token_level: ClassVar[bool] = False

    @classmethod
    def validate_for_model(cls, options: dict[str, Any], site: str, *, d_model: int, n_heads: int) -> list[str]:
        return []

    @staticmethod
    def export_problems(target: str, options: dict[str, Any], site: str) -> list[str]:
        return []

    def sentence_state(self) -> frozenset[str]:
        return frozenset()
