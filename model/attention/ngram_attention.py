"""What ConvKV and QueryK share: head structures, masks, interleaving, decoding state.

An n-gram attention module splits its heads into groups (`ngram_options.HeadGroup`): one
group per n-gram size for the homogeneous structure, one group of every head over all sizes
for the heterogeneous and interleaved structures. A group attends, under one softmax per head,
to the n-grams of its sizes laid out size-major (ngram.py): scores (…, T, G·S). The subclass
(convkv.py, queryk.py) says which projections exist and how a query scores an n-gram;
everything else lives here.

Every projection is a convolution over rows (a plain projection is one of width 1), and all
the projections that read the same rows run as ONE matmul over the row windows
(`ngram_windows.fused_ngram_conv`): in self-attention the queries, keys and values of every n-gram
size come from a single GEMM, which keeps the number of kernel launches per training step low.

Decoding state (every tensor batch-first, so that reordering the beam is one index_select):
- self-attention: "k" (N, H, t, …) the keys of every step so far (dim 2 counts the steps, as
  for vanilla), "v" (N, H, t, G, dh) the n-gram values, "x_tail" (N, n_max-1, D) the last
  n_max-1 input rows that the next n-gram windows (keys, values and n-gram queries) reach back to.
- cross-attention: "k" and "v" of the source n-grams, computed once in `init_state`, and for the
  interleaved structure "x_tail" (N, 1, D), the previous query row of the bigram queries.
- interleaved structure with edge "inside", both decoder sites: "bigram_gate" (N, 1), 0 before
  the first step and 1 after it: the first position's bigram slot is 0 (§3.3, eq. 9-17: I_dec = (0, u_1, b_1, …)).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from model.attention.contract import AttentionModule, AttentionOut
from model.attention.functional import dropout as dropout_if_training, masked_softmax, merge_heads
from model.attention.ngram_windows import (
    causal_key_mask,
    fused_ngram_conv,
    ngram_valid,
    phrase_table,
    source_invalid,
    source_key_mask,
    spread_to_tokens,
    strided_merge_windows,
)
from model.attention.ngram_options import (
    HeadGroup,
    ngram_spec,
    validate_ngram_for_model,
    validate_ngram_options,
)

State = dict[str, torch.Tensor]


def conv_weight(module: nn.Module) -> torch.Tensor:
    """(C, D, n): a Conv1d's weight, or a Linear's as a width-1 convolution."""
    return module.weight if isinstance(module, nn.Conv1d) else module.weight.unsqueeze(-1)


def qk_scale(dim: int) -> float:
    return 1.0 / math.sqrt(dim)


class NgramAttention(AttentionModule):
    """Base of the n-gram attention kinds; subclasses define `kind` and the hooks at the bottom."""

    kind = ""

    def __init__(self, d_model: int, n_heads: int, dropout: float, site: str, options: dict[str, Any]):
        super().__init__()
        self.spec = ngram_spec(options, n_heads)
        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.site = site
        self.dropout = dropout
        # Source-side n-grams reaching before position 0 exist (edge "padded") or not ("inside").
        self.padded_edge = self.spec.padded_edge
        # Interleaved decoder sites with edge "inside": the bigram slot of position 0 is zero (§3.3: I_dec = (0, u_1, b_1, …)).
        self.gated_first_bigram = self.spec.interleaved and site != "encoder_self" and not self.padded_edge
        # Keys (and encoder n-gram queries) come from a source sentence: the edge/padding rule applies.
        self.source_keys = site != "decoder_self"
        self.source_queries = site == "encoder_self"
        # Cross-attention reports which source n-grams each target token attended to (sizes 1..n_max).
        self.phrase_sizes = self.spec.n_max if site == "cross" else 0
        self.sizes_per_head = len(self.spec.groups[0].ngrams)
        # For homogeneous heads: which entry of spec.ngrams each head attends to (a constant).
        head_sizes = [self.spec.ngrams.index(group.ngrams[0]) for group in self.spec.groups for _ in range(group.heads)]
        self.register_buffer("head_sizes", torch.tensor(head_sizes), persistent=False)
        # Tensors derived from constant buffers and shapes alone, kept in inference
        # (`inference_constants_allowed`, `_kept`): key -> (the buffers' storage, the tensors).
        self._derived: dict[tuple, tuple[tuple, Any]] = {}
        self._build()
        if self.spec.interleaved:
            # n-gram queries (eq. 9-10): a width-2 convolution over the query rows.
            self.q_bigram = nn.Conv1d(d_model, self.q_proj.out_features, 2)
            # The strided merge convolution replaces the output projection (eq. 17).
            self.merge_window = 3 if site == "encoder_self" else 2
            self.merge = nn.Linear(self.merge_window * d_model, d_model)
        else:
            self.out_proj = nn.Linear(d_model, d_model)

    @classmethod
    def validate_options(cls, options: dict[str, Any], site: str) -> list[str]:
        return validate_ngram_options(cls.kind, options, site)

    @classmethod
    def validate_for_model(cls, options: dict[str, Any], site: str, *, d_model: int, n_heads: int) -> list[str]:
        return validate_ngram_for_model(cls.kind, options, site, n_heads)

    # -- full pass ------------------------------------------------------------------------
    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor | None = None,
        *,
        key_padding_mask: torch.Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
        need_phrase_attention: bool = False,
    ) -> AttentionOut:
        """x (B, T, D) queries; memory (B, S, D) for cross-attention, else x itself.

        Returns the output (B, T, D) and, when asked, token-level probabilities (B, H, T, S) (each
        n-gram's weight shared by its tokens); with need_phrase_attention also the phrase table
        (B, H, T, n_max, S): [.., n-1, j] = weight of the source n-gram starting at j of length n.
        """
        if memory is None:  # self-attention: queries, keys and values from one convolution
            q_out, *source_outs = self._project(x, self._query_parts() + self._source_parts(), 0)
        else:
            (q_out,) = self._project(x, self._query_parts(), 0)
            source_outs = self._project(memory, self._source_parts(), 0)
        k, v = self._keys_values(source_outs)
        return self._attend(
            self._queries(q_out), k, v, t_len=x.shape[1], key_padding_mask=key_padding_mask, causal=causal,
            need_weights=need_weights, need_phrase_attention=need_phrase_attention, bigram_keep=self._bigram_keep(x, key_padding_mask),
        )

    def _bigram_keep(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None) -> torch.Tensor | None:
        """Interleaved full pass: (B|1, T) 1 where the bigram query of position t exists, 0 where its
        slot is zero; None when every one exists (or the structure has no n-gram queries)."""
        if not self.spec.interleaved:
            return None
        t_len = x.shape[1]
        if self.source_queries:  # encoder: the source-side rule of the edge option
            return ngram_valid(key_padding_mask, t_len, 2, x.device, self.padded_edge).to(x.dtype)  # (B|1, T)
        if self.gated_first_bigram:  # decoder: the full pass starts at position 0
            return (torch.arange(t_len, device=x.device) > 0).to(x.dtype).unsqueeze(0)  # (1, T)
        return None

    # -- incremental decoding -------------------------------------------------------------
    def init_state(self, memory: torch.Tensor | None, batch_size: int, device: torch.device, dtype: torch.dtype) -> State:
        if self.site == "cross":
            assert memory is not None
            k, v = self._keys_values(self._project(memory, self._source_parts(), 0))
            state = {"k": k, "v": v}
            if self.spec.interleaved:
                state["x_tail"] = torch.zeros(batch_size, 1, self.d_model, device=device, dtype=dtype)  # (N, 1, D)
        else:
            n, h, dh = batch_size, self.n_heads, self.head_dim
            state = {
                "k": torch.zeros(n, h, 0, *self._key_tail_shape(), device=device, dtype=dtype),  # (N, H, 0, …)
                "v": torch.zeros(n, h, 0, self.sizes_per_head, dh, device=device, dtype=dtype),  # (N, H, 0, G, dh)
                "x_tail": torch.zeros(n, self.spec.n_max - 1, self.d_model, device=device, dtype=dtype),  # (N, n_max-1, D)
            }
        if self.gated_first_bigram:
            state["bigram_gate"] = torch.zeros(batch_size, 1, device=device, dtype=dtype)  # (N, 1): no bigram yet
        return state

    def sentence_state(self) -> frozenset[str]:
        # The interleaved structure's "x_tail" is the previous query row: per beam.
        return frozenset({"k", "v"}) if self.site == "cross" else frozenset()

    def step(
        self,
        x: torch.Tensor,
        state: State,
        *,
        key_padding_mask: torch.Tensor | None = None,
        need_weights: bool = False,
        need_phrase_attention: bool = False,
    ) -> AttentionOut:
        """One decoding step: x (N, 1, D) -> output (N, 1, D), probabilities (N, H, 1, S), the phrase
        table (N, H, 1, n_max, S) when need_phrase_attention, new state."""
        if self.site == "cross":
            k, v = state["k"], state["v"]
            new_state = dict(state)
            rows, offset = x, 0
            if self.spec.interleaved:
                rows, offset = torch.cat([state["x_tail"], x], dim=1), 1  # (N, 2, D)
                new_state["x_tail"] = x
            (q_out,) = self._project(rows, self._query_parts(), offset)
        else:
            offset = self.spec.n_max - 1
            rows = torch.cat([state["x_tail"], x], dim=1)  # (N, n_max, D): the windows ending now
            q_out, *source_outs = self._project(rows, self._query_parts() + self._source_parts(), offset)
            new_k, new_v = self._keys_values(source_outs)  # (N, H, 1, …)
            k = torch.cat([state["k"], new_k], dim=2)  # (N, H, t+1, …)
            v = torch.cat([state["v"], new_v], dim=2)  # (N, H, t+1, G, dh)
            new_state = {"k": k, "v": v, "x_tail": rows[:, 1:]}
        keep = None
        if self.gated_first_bigram:
            keep = state["bigram_gate"]  # (N, 1)
            new_state["bigram_gate"] = torch.ones_like(keep)
        attended = self._attend(
            self._queries(q_out), k, v, t_len=1, key_padding_mask=key_padding_mask, causal=False,
            need_weights=need_weights, need_phrase_attention=need_phrase_attention, bigram_keep=keep,
        )
        return AttentionOut(attended.out, attended.probs, attended.phrase_attention, new_state)

    # -- shared machinery -----------------------------------------------------------------
    def _query_parts(self) -> list[list[nn.Module]]:
        # Bigram queries first: the output then reads as (B, T, 2, Wq) = [bigram row, unigram row].
        return [[self.q_bigram, self.q_proj]] if self.spec.interleaved else [[self.q_proj]]

    def _project(self, rows: torch.Tensor, parts: list[list[nn.Module]], offset: int) -> list[torch.Tensor]:
        """Every block over rows[:, offset:] (windows reach back into the first `offset` rows), as one
        convolution; returns one output (B, S-offset, C) per part, its blocks' channels in order."""
        blocks = [block for part in parts for block in part]
        out = fused_ngram_conv(rows, [conv_weight(b) for b in blocks], [b.bias for b in blocks], offset)  # (B, S', ΣC)
        if len(parts) == 1:
            return [out]
        return list(out.split([sum(b.out_channels if isinstance(b, nn.Conv1d) else b.out_features for b in part)
                               for part in parts], dim=-1))

    def _kept(self, key: tuple, buffers: list[torch.Tensor], make: Callable[[], Any]) -> Any:
        """`make()` from constant `buffers` (the module's structure, never trained or changed in
        place), kept under `key` while they keep their storage: a move to another device makes it anew.
        Nothing computed from the parameters is kept: a change made through `.data` would go unseen."""
        where = tuple(t.data_ptr() for t in buffers)
        kept = self._derived.get(key)
        if kept is None or kept[0] != where:
            kept = self._derived[key] = (where, make())
        return kept[1]

    def _queries(self, q: torch.Tensor) -> torch.Tensor | list[torch.Tensor]:
        """(B, T, Wq) or, interleaved, (B, T, 2·Wq) -> per head group (B, h, Tq, E); Tq = 2T for the
        interleaved structure (bigram row, then unigram row, for every position)."""
        if self.spec.interleaved:
            q = q.reshape(q.shape[0], 2 * q.shape[1], -1)  # (B, 2T, Wq)
        return self._split_queries(q)

    def _key_mask(self, group: HeadGroup, t_len: int, s_len: int, key_padding_mask, causal: bool, device) -> torch.Tensor | None:
        """(B|1, 1, Tq|1, G·S) True where a query must NOT attend to an n-gram (ngram.py states the rule)."""
        if self.source_keys:
            return source_key_mask(key_padding_mask, s_len, group.ngrams, device, self.padded_edge)
        if not causal:
            return None  # an incremental step: every cached n-gram is in the past
        mask = causal_key_mask(t_len, s_len, len(group.ngrams), device)  # (1, 1, T, G·S)
        # Both query rows of position t (bigram and unigram) see what t sees.
        return mask.repeat_interleave(2, dim=2) if self.spec.interleaved else mask

    def _all_heads_mask(self, t_len: int, s_len: int, key_padding_mask, causal: bool, device) -> tuple[torch.Tensor | None, bool]:
        """One key mask for every head, and whether a row may be empty (see `_attend`)."""
        if len(self.spec.groups) == 1:
            group = self.spec.groups[0]
            hidden = self._key_mask(group, t_len, s_len, key_padding_mask, causal, device)
            return hidden, self.source_keys and min(group.ngrams) > 1 and not self.padded_edge
        # Homogeneous: one size per head.
        if not self.source_keys:
            return self._key_mask(self.spec.groups[0], t_len, s_len, key_padding_mask, causal, device), False
        invalid = source_invalid(key_padding_mask, s_len, self.spec.ngrams, device, self.padded_edge)  # (B|1, sizes, S)
        hidden = invalid.index_select(1, self.head_sizes).unsqueeze(2)  # (B|1, H, 1, S)
        return hidden, self.spec.n_max > 1 and not self.padded_edge

    def _attend(
        self, queries, k: torch.Tensor, v: torch.Tensor, *, t_len: int, key_padding_mask: torch.Tensor | None,
        causal: bool, need_weights: bool, need_phrase_attention: bool, bigram_keep: torch.Tensor | None,
    ) -> AttentionOut:
        """Attention of every head group over its n-grams, then the output (or strided merge) projection.

        queries as `_queries` gives them, keys (B, H, S, …) and n-gram values (B, H, S, G, dh);
        t_len target positions; bigram_keep (B|1, T) for the interleaved structure: 1 where the
        bigram query of position t exists, 0 where its slot is zero (None: all exist).
        need_phrase_attention (the table) implies need_weights.

        Heterogeneous heads ("Phrase-Based Attentions" §3.2.2; "Enhancing Attention with Explicit
        Phrasal Alignments" eq. 7-12): the logits for every size are concatenated before ONE
        softmax and the values concatenated the same way, so a query attends to unigrams,
        bigrams and trigrams at once. Homogeneous heads (§3.2.1): each head over its own size.
        Interleaved (§3.3, eq. 9-17): queries (B, H, 2T, ·) hold a bigram and a unigram row per
        position, merged after attention by the strided convolution.
        """
        need_weights = need_weights or need_phrase_attention
        s_len = k.shape[2]
        dropout = self.dropout if self.training else 0.0
        hidden, may_be_empty = self._all_heads_mask(t_len, s_len, key_padding_mask, causal, k.device)
        values = v.transpose(2, 3).flatten(2, 3)  # (B, H, G·S, dh)
        probs, phrases = [], []
        if not need_weights and self._fused_context is not None:
            # Every head in one fused call (homogeneous heads differ only in their key mask).
            context = self._fused_context(queries, k, values, hidden, dropout, may_be_empty)  # (B, H, Tq, dh)
        else:
            # Every group has G sizes per head, so the groups' scores stack along the heads: one softmax.
            scores, head = [], 0
            for g, group in enumerate(self.spec.groups):
                heads = slice(head, head + group.heads)
                head += group.heads
                q = queries[g] if isinstance(queries, list) else queries[:, heads]
                scores.append(self._scores(q, k if len(self.spec.groups) == 1 else k[:, heads], g))  # (B, h, Tq, G·S)
            logits = scores[0] if len(scores) == 1 else torch.cat(scores, dim=1)  # (B, H, Tq, G·S)
            p = masked_softmax(logits, hidden, may_be_empty)
            context = torch.matmul(dropout_if_training(p, dropout, self.training).to(values.dtype), values)  # (B, H, Tq, dh)
            if need_weights:
                p = p.unflatten(-1, (self.sizes_per_head, s_len))  # (B, H, Tq, G, S)
                head = 0
                for group in self.spec.groups:
                    own = p[:, head : head + group.heads]  # (B, h, Tq, G, S)
                    head += group.heads
                    clipped = self.source_keys and self.padded_edge  # windows before 0 hold their real tokens
                    probs.append(spread_to_tokens(own, group.ngrams, clipped))
                    if need_phrase_attention:
                        phrases.append(phrase_table(own, group.ngrams, self.spec.n_max, clipped))
        context = merge_heads(context)  # (B, Tq, D)
        probs_out = torch.cat(probs, dim=1) if need_weights else None  # (B, H, Tq, S)
        phrases_out = torch.cat(phrases, dim=1) if need_phrase_attention else None  # (B, H, Tq, n_max, S)
        if not self.spec.interleaved:
            return AttentionOut(self.out_proj(context), probs_out, phrases_out)
        b, d = context.shape[0], self.d_model
        keep = None
        if bigram_keep is not None:
            # A bigram query that does not exist (edge rule, padding) gives a zero slot (§3.3, I_enc and I_dec).
            keep = torch.stack([bigram_keep, torch.ones_like(bigram_keep)], dim=-1).to(context.dtype)  # (B|1, T, 2)
            context = (context.view(b, t_len, 2, d) * keep.unsqueeze(-1)).view(b, 2 * t_len, d)  # (B, 2T, D)
        out = self.merge(strided_merge_windows(context, self.merge_window))  # (B, T, D)
        # The reported attention of position t is the mean of the query streams that reach its output.
        if probs_out is not None:
            probs_out = stream_mean(probs_out.unflatten(2, (t_len, 2)), keep)  # (B, H, T, S)
        if phrases_out is not None:
            phrases_out = stream_mean(phrases_out.unflatten(2, (t_len, 2)), keep)  # (B, H, T, n_max, S)
        return AttentionOut(out, probs_out, phrases_out)

    # -- hooks for the subclasses ---------------------------------------------------------
    def _build(self) -> None:
        """Create q_proj (a Linear D -> Wq) and the parameters that `_source_parts` returns."""
        raise NotImplementedError

    def _source_parts(self) -> list[list[nn.Module]]:
        """The Linear / Conv1d modules that read the key/value rows, grouped into the outputs
        `_keys_values` takes (blocks of equal width adjacent where the layout allows: fewer pads)."""
        raise NotImplementedError

    def _key_tail_shape(self) -> tuple[int, ...]:
        """Trailing shape of the cached keys after (N, H, t)."""
        raise NotImplementedError

    def _split_queries(self, q: torch.Tensor) -> torch.Tensor | list[torch.Tensor]:
        """(B, Tq, Wq) -> per head group (B, h, Tq, E), or one (B, H, Tq, E) when
        every head has the same E (then groups are slices of it)."""
        raise NotImplementedError

    def _keys_values(self, outs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """The source parts' outputs (B, S, C) -> keys (B, H, S, …) and n-gram values (B, H, S, G, dh)."""
        raise NotImplementedError

    def _scores(self, q: torch.Tensor, k: torch.Tensor, g: int) -> torch.Tensor:
        """Scores (B, h, Tq, G·S) of head group g's queries over its n-grams, size-major."""
        raise NotImplementedError

    # A subclass may set this to a function (q, k, values, hidden, dropout, may_be_empty) -> context
    # (B, H, Tq, dh) of every head that fuses scores, softmax and values when nobody reads the weights.
    _fused_context = None


def stream_mean(rows: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """(B, H, T, 2, …) per-stream attention -> (B, H, T, …): the mean over the streams whose slot is kept.

    keep (B|1, T, 2) holds 1 for a kept slot and 0 for a zero one (the unigram slot is always kept).
    """
    if keep is None:
        return rows.mean(3)
    w = keep.view(*keep.shape[:1], 1, *keep.shape[1:], *([1] * (rows.dim() - 4)))  # (B|1, 1, T, 2, 1…)
    return (rows * w).sum(3) / w.sum(3)


def heads_by_size(out: torch.Tensor, parts: int, n_heads: int, sizes_per_head: int) -> torch.Tensor:
    """(B, S, [parts ·] G·H·dh) with channels ordered (size, part, head, dh) -> (parts, B, H, S, G, dh),
    a view of one contiguous (parts, B, H, G, S, dh) tensor: the layout attention reads values in.

    Homogeneous modules have G = 1 and their groups' heads side by side; heterogeneous ones one
    group with every size.
    """
    b, s = out.shape[0], out.shape[1]
    split = out.view(b, s, sizes_per_head, parts, n_heads, -1)  # (B, S, G, parts, H, dh)
    return split.permute(3, 0, 4, 2, 1, 5).contiguous().transpose(3, 4)  # (parts, B, H, S, G, dh)
