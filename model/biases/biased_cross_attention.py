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

One pass: logits ℓ = inner.token_logits (every target row at once); then the biased
probabilities softmax(ℓ + Σ_terms bias) in one of two forms (`model.biases.window_bias`):
- "recurrent" (Cohn et al. §3.2–§3.3): step t's Markov/fertility terms read the biased rows of
  steps < t, so the softmax runs step by step over the target (`model.biases.recurrence`); a step
  of incremental decoding carries its biased row.
- "parallel": they read the unbiased α = softmax(ℓ): its history (previous step, coverage) is a
  shift and a cumsum over the whole target (`model.biases.history.full_history`); a step carries
  its unbiased row.
out = inner.mix. The returned probabilities (the alignment) are the biased ones, which the model
actually attends with.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn

from model.attention.contract import AttentionModule, AttentionOut
from model.attention.functional import masked_softmax
from model.biases.history import STATE_KEYS, History, full_history, initial_state, next_state, step_history
from model.biases.options import bias_form
from model.biases import recurrence_kernel
from model.biases.recurrence import window_probs
from model.biases.registry import bias_class
from model.biases.window_bias import WindowBias, window_band

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
        self.recurrent = bias_form(biases) == "recurrent"

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        *,
        key_padding_mask: torch.Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
        need_phrase_attention: bool = False,
    ) -> AttentionOut:
        """x (B, T, D) target rows, memory (B, S, D) -> output (B, T, D), biased probabilities (B, H, T, S)."""
        kv = self.inner.init_state(memory, memory.shape[0], memory.device, memory.dtype)
        logits = self.inner.token_logits(x, kv)  # (B, H, T, S)
        hidden = padding(key_padding_mask)
        lengths = source_lengths(key_padding_mask, logits.shape[0], logits.shape[3], logits.device)  # (B,)
        if self.recurrent:
            probs = self._recurrent_probs(logits, key_padding_mask, lengths)
        else:
            history = full_history(masked_softmax(logits, hidden, may_be_empty=True), self.signals)
            probs = self._biased_probs(logits, hidden, history, lengths)
        return AttentionOut(self.inner.mix(probs, kv), probs if need_weights or need_phrase_attention else None)

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
        need_phrase_attention: bool = False,
    ) -> AttentionOut:
        """One step: x (N, 1, D) -> output (N, 1, D), biased probabilities (N, H, 1, S), new state."""
        bias_keys = set(STATE_KEYS.values())
        kv = {name: t for name, t in state.items() if name not in bias_keys}
        logits = self.inner.token_logits(x, kv)  # (N, H, 1, S)
        hidden = padding(key_padding_mask)
        lengths = source_lengths(key_padding_mask, logits.shape[0], logits.shape[3], logits.device)  # (N,)
        probs = self._biased_probs(logits, hidden, step_history(state, self.signals), lengths)
        # The recurrent form carries the row it attended with; the parallel one the unbiased row.
        attended = probs if self.recurrent else masked_softmax(logits, hidden, may_be_empty=True)  # (N, H, 1, S)
        new_state = dict(kv)
        new_state.update(next_state(state, attended, self.signals))
        return AttentionOut(self.inner.mix(probs, kv), probs if need_weights or need_phrase_attention else None, state=new_state)

    def bias(self, history: History, lengths: torch.Tensor, source_len: int,
             reads: frozenset[str] | None = None) -> torch.Tensor | None:
        """Σ of the bias terms (B, H, T, S) fp32, before masking; lengths (B,) real source lengths.
        With `reads`, only the terms reading one of those signals (None when there are none)."""
        total = None
        for term in self.biases.values():
            if reads is not None and term.reads not in reads:
                continue
            value = term(history, lengths, source_len)  # (B, H, T, S)
            total = value if total is None else total + value
        return total

    def _recurrent_probs(self, logits: torch.Tensor, key_padding_mask: torch.Tensor | None, lengths: torch.Tensor) -> torch.Tensor:
        """The recurrent form over a whole target (`model.biases.recurrence`): the terms that read no
        attention (position) are computed for every row at once, the others step by step (on CUDA
        in one kernel, `model.biases.recurrence_kernel`)."""
        hidden = padding(key_padding_mask)
        source_len = logits.shape[3]
        positions = torch.arange(logits.shape[2], device=logits.device).unsqueeze(0)  # (1, T)
        static = self.bias(History(position=positions), lengths, source_len, frozenset({"position"}))  # (B, H, T, S)
        carried = self.signals - {"position"}
        weights = self._kernel_weights()
        if weights is not None and recurrence_kernel.wanted(logits):
            biased = logits if static is None else logits + static
            return recurrence_kernel.recurrent_softmax(biased, key_padding_mask, weights.get("previous"), weights.get("coverage"))
        # The window weights as band matrices once per pass, not once per step; summed in the
        # order of `bias`, so that a step adds exactly what a decoding step adds.
        windows = [(term.reads, window_band(term.weight, source_len)) for term in self.biases.values()
                   if term.reads in carried]
        return window_probs(logits, hidden, windows, static)

    def _kernel_weights(self) -> dict[str, torch.Tensor] | None:
        """The window weights by the signal they read, when the one-kernel recurrence can run these
        terms (at most one window term per carried signal); None otherwise."""
        weights: dict[str, torch.Tensor] = {}
        for term in self.biases.values():
            if term.reads == "position":
                continue
            if not isinstance(term, WindowBias) or term.reads in weights:
                return None
            weights[term.reads] = term.weight
        return weights

    def _biased_probs(
        self, logits: torch.Tensor, hidden: torch.Tensor | None, history: History, lengths: torch.Tensor
    ) -> torch.Tensor:
        """softmax(ℓ + Σ_terms bias) over real source tokens; lengths (B,) real source lengths."""
        biased = logits + self.bias(history, lengths, logits.shape[3])
        return masked_softmax(biased, hidden, may_be_empty=True)  # (B, H, T, S)
