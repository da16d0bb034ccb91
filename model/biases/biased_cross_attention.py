"""A cross-attention with structural alignment biases (Cohn et al., 2016) added to its logits.

`BiasedCrossAttention(inner, biases)` has the attention-module interface of the kind it wraps
(model/attention/contract.py), so the decoder layer, the decoding state, beam reordering and the
exports see an ordinary cross-attention. The inner kind must be `token_level` (`VanillaAttention`
is):

    token_logits(x, state) -> (B, H, T, S) fp32 logits before masking
    mix(probs, state)      -> (B, T, D)    attention dropout, values, output projection

where `state` is the inner's own `init_state(memory, ...)` for the cross site (the projected
memory; it must not change between steps). Kinds without it (the phrasal n-gram kinds) are
refused by `model.biases.options.validate_alignment_biases`.

One pass: logits ℓ = inner.token_logits; unbiased α = softmax(ℓ) over real source tokens; the
history of α (previous step, coverage, target position; `model.biases.history`); biased
logits ℓ + Σ_terms bias; probabilities = softmax of those; out = inner.mix. The returned
probabilities (the alignment) are the biased ones, which the model actually attends with.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn

from model.attention.contract import AttentionModule, AttentionOut
from model.attention.functional import masked_softmax
from model.biases.history import STATE_KEYS, History, full_history, initial_state, next_state, step_history
from model.biases.registry import bias_class

State = dict[str, torch.Tensor]


def padding(key_padding_mask: torch.Tensor | None) -> torch.Tensor | None:
    """key_padding_mask (B, S) -> (B, 1, 1, S) against logits (B, H, T, S); True at padding."""
    return None if key_padding_mask is None else key_padding_mask[:, None, None, :]


def source_lengths(key_padding_mask: torch.Tensor | None, batch_size: int, source_len: int, device: torch.device) -> torch.Tensor:
    """(B,) real source lengths: the non-padding positions of each row."""
    if key_padding_mask is None:
        return torch.full((batch_size,), source_len, dtype=torch.long, device=device)
    return (~key_padding_mask).sum(dim=-1)  # (B,)


class BiasedCrossAttention(AttentionModule):
    def __init__(self, inner: nn.Module, n_heads: int, biases: Mapping[str, Mapping[str, Any]]):
        super().__init__()
        self.inner = inner
        self.n_heads = n_heads
        self.biases = nn.ModuleDict({name: bias_class(name)(n_heads, dict(options)) for name, options in sorted(biases.items())})
        self.signals = frozenset(term.reads for term in self.biases.values())

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        *,
        key_padding_mask: torch.Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
        need_phrases: bool = False,
    ) -> AttentionOut:
        """x (B, T, D) target rows, memory (B, S, D) -> output (B, T, D), biased probabilities (B, H, T, S)."""
        kv = self.inner.init_state(memory, memory.shape[0], memory.device, memory.dtype)
        logits = self.inner.token_logits(x, kv)  # (B, H, T, S)
        hidden = padding(key_padding_mask)
        history = full_history(masked_softmax(logits, hidden, may_be_empty=True), self.signals)
        probs = self._biased_probs(logits, hidden, history, key_padding_mask)
        return AttentionOut(self.inner.mix(probs, kv), probs if need_weights or need_phrases else None)

    def init_state(self, memory: torch.Tensor, batch_size: int, device: torch.device, dtype: torch.dtype) -> State:
        state = dict(self.inner.init_state(memory, batch_size, device, dtype))
        clash = sorted(set(state) & set(STATE_KEYS.values()))
        assert not clash, f"the inner cross-attention's state uses the bias state names {clash}"
        state.update(initial_state(self.signals, memory.shape[0], self.n_heads, memory.shape[1], memory.device))
        return state

    def sentence_state(self) -> frozenset[str]:
        return self.inner.sentence_state()  # the bias history is per beam

    def step(
        self,
        x: torch.Tensor,
        state: State,
        *,
        key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = False,
        need_phrases: bool = False,
    ) -> AttentionOut:
        """One step: x (N, 1, D) -> output (N, 1, D), biased probabilities (N, H, 1, S), new state."""
        bias_keys = set(STATE_KEYS.values())
        kv = {name: t for name, t in state.items() if name not in bias_keys}
        logits = self.inner.token_logits(x, kv)  # (N, H, 1, S)
        hidden = padding(key_padding_mask)
        unbiased = masked_softmax(logits, hidden, may_be_empty=True)  # (N, H, 1, S)
        probs = self._biased_probs(logits, hidden, step_history(state, self.signals), key_padding_mask)
        new_state = dict(kv)
        new_state.update(next_state(state, unbiased, self.signals))
        return AttentionOut(self.inner.mix(probs, kv), probs if need_weights or need_phrases else None, state=new_state)

    def bias(self, history: History, lengths: torch.Tensor, source_len: int) -> torch.Tensor:
        """Σ of every bias term (B, H, T, S) fp32, before masking; lengths (B,) real source lengths."""
        total = None
        for term in self.biases.values():
            value = term(history, lengths, source_len)  # (B, H, T, S)
            total = value if total is None else total + value
        return total

    def _biased_probs(
        self, logits: torch.Tensor, hidden: torch.Tensor | None, history: History, key_padding_mask: torch.Tensor | None
    ) -> torch.Tensor:
        lengths = source_lengths(key_padding_mask, logits.shape[0], logits.shape[3], logits.device)  # (B,)
        biased = logits + self.bias(history, lengths, logits.shape[3])
        return masked_softmax(biased, hidden, may_be_empty=True)  # (B, H, T, S)
