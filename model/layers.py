"""Pre-norm encoder and decoder layers: x + Dropout(Sublayer(LayerNorm(x)))."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from model.attention.contract import AttentionKind, AttentionOut
from model.attention.functional import dropout
from model.attention.registry import attention_class
from model.config import ModelConfig
from model.phrase_representation.modules import PhraseCombination, PhraseCrossAttention
from model.phrase_representation.functional import chunk_phrase_table

State = dict[str, torch.Tensor]


def dropped(module: nn.Dropout, x: torch.Tensor) -> torch.Tensor:
    """`module(x)` without the module call (model.attention.functional.dropout)."""
    return dropout(x, module.p, module.training)


def has_phrase_attention(attention: AttentionKind) -> bool:
    """Whether an attention module reports source n-grams (phrasal cross-attention does)."""
    return attention.phrase_sizes > 0


def build_attention(config: ModelConfig, site: str) -> AttentionKind:
    spec = config.attention(site)
    cls = attention_class(spec.kind)
    attention = cls(config.d_model, config.n_heads, config.attention_dropout, site, dict(spec.options))
    if site == "cross" and config.alignment_biases:
        # Structural alignment biases (Cohn et al.) wrap the cross-attention; its state carries theirs.
        from model.biases.biased_cross_attention import BiasedCrossAttention

        attention = BiasedCrossAttention(attention, config.n_heads, config.alignment_biases)
    return attention


class FeedForward(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.up = nn.Linear(config.d_model, config.d_ff)
        self.down = nn.Linear(config.d_ff, config.d_model)
        self.activation_dropout = config.activation_dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = dropout(F.relu(self.up(x)), self.activation_dropout, self.training)
        return self.down(hidden)


class EncoderLayer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.self_norm = nn.LayerNorm(config.d_model)
        self.self_attention = build_attention(config, "encoder_self")
        self.ffn_norm = nn.LayerNorm(config.d_model)
        self.ffn = FeedForward(config)
        self.dropout = nn.Dropout(config.dropout)
        # Attentive source-phrase representations (Xu et al.): the attentive combination sublayer.
        self.phrase_combination = PhraseCombination(config) if config.phrase_representation is not None else None

    def forward(
        self, x: torch.Tensor, pad_mask: torch.Tensor,
        phrases: torch.Tensor | None = None, phrase_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x (B, S, D) -> (B, S, D); with phrase representations, phrases (B, S, D) are the previous
        layer's chunk vectors and phrase_mask (B, S) is True where no chunk starts."""
        if self.phrase_combination is not None:
            # The tokens first read the previous layer's phrases (Xu et al. §3.2, attentive combination).
            x = x + dropped(self.dropout, self.phrase_combination(x, phrases, phrase_mask))
        attended = self.self_attention(self.self_norm(x), key_padding_mask=pad_mask).out
        x = x + dropped(self.dropout, attended)
        return x + dropped(self.dropout, self.ffn(self.ffn_norm(x)))


class DecoderLayer(nn.Module):
    """Self-attention, [phrase cross-attention,] cross-attention, feed-forward; each pre-norm.

    The full pass and the decoding step return one `AttentionOut`: the layer's output, the
    cross-attention's per-head probabilities (B, H, T, S) when asked, the phrase table when asked,
    and after a step the layer's new state {"self", "cross"[, "phrase"]}.

    The phrase table (B, H, T, n_max, S) is the phrasal cross-attention's own n-gram table, or
    with phrase representations (phrase_representations (B, K, S, D) and phrase_chunks (B, S) from
    `Memory`) the phrase attention over the chunks (B, H, T, 8, S), or else the token attention as
    1-grams (B, H, T, 1, S). A phrasal cross-attention keeps its own table even with phrase
    representations: the token attention reported beside it is that table spread over tokens, so
    the two views agree, and its n-grams are chosen at every position rather than cut at fixed
    chunk boundaries.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.self_norm = nn.LayerNorm(config.d_model)
        self.self_attention = build_attention(config, "decoder_self")
        self.cross_norm = nn.LayerNorm(config.d_model)
        self.cross_attention = build_attention(config, "cross")
        self.ffn_norm = nn.LayerNorm(config.d_model)
        self.ffn = FeedForward(config)
        self.dropout = nn.Dropout(config.dropout)
        # Attentive source-phrase representations (Xu et al.): phrase cross-attention before the token one.
        with_phrases = config.phrase_representation is not None
        self.phrase_attention = PhraseCrossAttention(config) if with_phrases else None
        # The parts of this layer's decoding state ("layers.{i}.{part}.{name}").
        self.state_parts = ("self", "cross", "phrase") if with_phrases else ("self", "cross")

    def forward(
        self, x: torch.Tensor, memory: torch.Tensor, memory_pad_mask: torch.Tensor, *,
        need_weights: bool = False, need_phrase_attention: bool = False,
        phrase_representations: torch.Tensor | None = None, phrase_chunks: torch.Tensor | None = None,
    ) -> AttentionOut:
        """x (B, T, D), memory (B, S, D) -> out (B, T, D), cross-attention probs (B, H, T, S) when
        asked (need_phrase_attention implies need_weights), the phrase table when asked."""
        x = x + dropped(self.dropout, self.self_attention(self.self_norm(x), causal=True).out)
        chunk_probs = None
        if self.phrase_attention is not None:
            # Weights whenever the token attention's are asked for, so that a step with and without
            # the phrase table takes the same numerical path and agrees exactly.
            chunks = self.phrase_attention(x, phrase_representations, phrase_chunks.eq(0), need_weights or need_phrase_attention)
            x = x + dropped(self.dropout, chunks.out)
            chunk_probs = chunks.probs
        cross = self.cross_attention(
            self.cross_norm(x), memory, key_padding_mask=memory_pad_mask,
            need_weights=need_weights or need_phrase_attention, need_phrase_attention=need_phrase_attention and has_phrase_attention(self.cross_attention),
        )
        return self._finish(x, cross, chunk_probs, phrase_chunks, need_phrase_attention)

    def init_state(self, memory: torch.Tensor, phrase_representations: torch.Tensor | None = None) -> dict[str, State]:
        n = memory.shape[0]
        state = {
            "self": self.self_attention.init_state(None, n, memory.device, memory.dtype),
            "cross": self.cross_attention.init_state(memory, n, memory.device, memory.dtype),
        }
        if self.phrase_attention is not None:
            state["phrase"] = self.phrase_attention.init_state(phrase_representations)  # projected once per source
        return state

    def sentence_state(self) -> dict[str, frozenset[str]]:
        """Per part of `init_state`'s state: the names that are per sentence (model/attention/contract.py)."""
        parts = {"self": self.self_attention.sentence_state(), "cross": self.cross_attention.sentence_state()}
        if self.phrase_attention is not None:
            parts["phrase"] = self.phrase_attention.attention.sentence_state()  # the mixed phrases, projected once
        return parts

    def step(
        self, x: torch.Tensor, state: dict[str, State], memory_pad_mask: torch.Tensor, *,
        need_weights: bool = False, need_phrase_attention: bool = False, phrase_chunks: torch.Tensor | None = None,
    ) -> AttentionOut:
        """x (N, 1, D) -> as `forward` with T = 1, and the new state (phrase_chunks (N, S) with
        phrase representations)."""
        attended = self.self_attention.step(self.self_norm(x), state["self"])
        x = x + dropped(self.dropout, attended.out)
        new_state = {"self": attended.state}
        chunk_probs = None
        if self.phrase_attention is not None:
            chunks = self.phrase_attention.step(x, state["phrase"], phrase_chunks.eq(0), need_weights or need_phrase_attention)
            x = x + dropped(self.dropout, chunks.out)
            chunk_probs = chunks.probs
        cross = self.cross_attention.step(
            self.cross_norm(x), state["cross"], key_padding_mask=memory_pad_mask,
            need_weights=need_weights or need_phrase_attention, need_phrase_attention=need_phrase_attention and has_phrase_attention(self.cross_attention),
        )
        new_state["cross"] = cross.state
        if self.phrase_attention is not None:
            new_state["phrase"] = state["phrase"]
        out = self._finish(x, cross, chunk_probs, phrase_chunks, need_phrase_attention)
        return AttentionOut(out.out, out.probs, out.phrase_attention, new_state)

    def _finish(
        self, x: torch.Tensor, cross: AttentionOut, chunk_probs: torch.Tensor | None,
        phrase_chunks: torch.Tensor | None, need_phrase_attention: bool,
    ) -> AttentionOut:
        """The cross-attention's residual, the feed-forward, and the phrase table (class doc)."""
        x = x + dropped(self.dropout, cross.out)
        out = x + dropped(self.dropout, self.ffn(self.ffn_norm(x)))
        phrases = cross.phrase_attention
        if need_phrase_attention and phrases is None:
            if chunk_probs is not None:
                phrases = chunk_phrase_table(chunk_probs, phrase_chunks)  # (B, H, T, 8, S)
            else:
                phrases = cross.probs.unsqueeze(3)  # (B, H, T, 1, S): a token is the 1-gram starting there
        return AttentionOut(out, cross.probs, phrases)
