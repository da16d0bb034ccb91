"""The kernels of decoding.c on tensors: shapes and dtypes checked here, pointers passed there.

Every tensor must live on the CPU in float32 (int32 / uint8 / int64 where said), with a unit
stride along its last dimension; the kernels read other strides as given.
"""
from __future__ import annotations

import math

import torch

from model.cpu_kernels import library


def _lib():
    lib = library()
    if lib is None:
        raise RuntimeError("the CPU decoding kernels are not available (model.cpu_kernels.unavailable() says why)")
    return lib


def _check(tensor: torch.Tensor, dtype: torch.dtype, name: str) -> None:
    # A last dimension of one element has any stride (a tensor with it counts as contiguous).
    if tensor.dtype != dtype or tensor.device.type != "cpu" or (tensor.stride(-1) != 1 and tensor.shape[-1] > 1):
        raise ValueError(f"{name} must be a CPU {dtype} tensor with unit stride along its last dimension, got "
                         f"{tensor.dtype} on {tensor.device} with strides {tensor.stride()}")


def self_attention(q: torch.Tensor, k_columns: torch.Tensor, v_columns: torch.Tensor, column_stride: int,
                   table: torch.Tensor, n_heads: int) -> torch.Tensor:
    """One decoding step of self-attention over a paged cache.

    q (N, D); k_columns, v_columns (T,) int64: the address of every step's keys / values, each a
    block of rows `column_stride` floats apart; table (N, T) int32: the row of each step's column
    that holds row n's key and value. Returns softmax(q·kᵀ/√dₕ)·v per head, (N, D)."""
    _check(q, torch.float32, "q")
    _check(table, torch.int32, "table")
    _check(k_columns, torch.int64, "k_columns")
    _check(v_columns, torch.int64, "v_columns")
    n, d = q.shape
    steps = table.shape[1]
    if table.shape[0] != n or k_columns.numel() < steps or v_columns.numel() < steps:
        raise ValueError(f"table {tuple(table.shape)} does not match q {tuple(q.shape)} and "
                         f"{k_columns.numel()} / {v_columns.numel()} cache columns")
    out = torch.empty(n, d)
    code = _lib().phrasal_self_attention(
        q.data_ptr(), q.stride(0), k_columns.data_ptr(), v_columns.data_ptr(), column_stride, table.data_ptr(),
        table.stride(0), n, n_heads, steps, d // n_heads, 1.0 / math.sqrt(d // n_heads), out.data_ptr(), d)
    if code:
        raise ValueError(f"self-attention over {steps} steps with head size {d // n_heads} exceeds the kernel's limits")
    return out


def cross_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sentence: torch.Tensor, keep: torch.Tensor,
                    n_heads: int, need_attention: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One decoding step of cross-attention, each row reading its sentence's memory.

    q (N, D); k, v (B, S, D) the projected memory of B sentences; sentence (N,) int32: which of
    them row n reads; keep (B, S) uint8, nonzero where a position may be attended. Returns the
    output (N, D) and, with need_attention, the probabilities averaged over the heads (N, S)."""
    for tensor, dtype, name in ((q, torch.float32, "q"), (k, torch.float32, "k"), (v, torch.float32, "v"),
                                (sentence, torch.int32, "sentence"), (keep, torch.uint8, "keep")):
        _check(tensor, dtype, name)
    n, d = q.shape
    b, length, _ = k.shape
    if k.stride() != v.stride() or tuple(v.shape) != (b, length, d) or tuple(keep.shape) != (b, length) \
            or tuple(sentence.shape) != (n,):
        raise ValueError(f"cross-attention shapes disagree: q {tuple(q.shape)}, k {tuple(k.shape)}, "
                         f"v {tuple(v.shape)}, sentence {tuple(sentence.shape)}, keep {tuple(keep.shape)}")
    out = torch.empty(n, d)
    attention = torch.empty(n, length) if need_attention else None
    code = _lib().phrasal_cross_attention(
        q.data_ptr(), q.stride(0), k.data_ptr(), v.data_ptr(), k.stride(1), k.stride(0), sentence.data_ptr(),
        keep.data_ptr(), keep.stride(0), n, n_heads, length, d // n_heads, 1.0 / math.sqrt(d // n_heads),
        out.data_ptr(), d, attention.data_ptr() if attention is not None else None)
    if code:
        raise ValueError(f"cross-attention over {length} positions with head size {d // n_heads} exceeds the kernel's limits")
    return out, attention


def beam_candidates(logits: torch.Tensor, scores: torch.Tensor, banned: torch.Tensor, eos_only: torch.Tensor | None,
                    eos_id: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The `count` best (beam, token) continuations of each sentence, from the logits.

    logits (n·K, V) of the beams' next tokens (rows sentence-major); scores (n, K) the beams'
    cumulative log-probs; banned (V,) uint8, nonzero for tokens never generated; eos_only (n,)
    uint8 or None, nonzero for sentences that may only end. Returns values (n, count), best
    first, of score + log_softmax(logits)[token], and flat indices k·V + token: what
    `model.decoding.top_candidates.top_candidates` returns for the log-softmax of the logits with
    the banned tokens (and, at eos_only sentences, all but EOS) at -inf, up to the order of exact
    ties and the rounding of the softmax sum."""
    _check(logits, torch.float32, "logits")
    _check(banned, torch.uint8, "banned")
    scores = scores.contiguous()
    _check(scores, torch.float32, "scores")
    n, beams = scores.shape
    vocab = logits.shape[1]
    if logits.shape[0] != n * beams or banned.numel() != vocab or (eos_only is not None and eos_only.numel() != n):
        raise ValueError(f"beam candidates: logits {tuple(logits.shape)} do not match scores {tuple(scores.shape)}, "
                         f"banned {banned.numel()}, eos_only {None if eos_only is None else eos_only.numel()}")
    if eos_only is not None:
        _check(eos_only, torch.uint8, "eos_only")
    values = torch.empty(n, count)
    index = torch.empty(n, count, dtype=torch.long)
    code = _lib().phrasal_beam_candidates(
        logits.data_ptr(), logits.stride(0), scores.data_ptr(), n, beams, vocab, banned.data_ptr(),
        eos_only.data_ptr() if eos_only is not None else None, eos_id, count, values.data_ptr(), index.data_ptr())
    if code:
        raise ValueError(f"cannot take {count} candidates of {beams} beams over {vocab} tokens")
    return values, index


def add_layer_norm(x: torch.Tensor, y: torch.Tensor | None, weight: torch.Tensor, bias: torch.Tensor,
                   eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(x + y, layer_norm(x + y)) for x, y (N, D) contiguous; with y None, (x, layer_norm(x))."""
    x = x.contiguous()
    _check(x, torch.float32, "x")
    n, d = x.shape
    if y is not None:
        y = y.contiguous()
        _check(y, torch.float32, "y")
        if y.shape != x.shape:
            raise ValueError(f"add_layer_norm: y {tuple(y.shape)} differs from x {tuple(x.shape)}")
    _check(weight, torch.float32, "weight")
    _check(bias, torch.float32, "bias")
    if weight.numel() != d or bias.numel() != d:
        raise ValueError(f"add_layer_norm: weight and bias must have {d} elements")
    total = torch.empty_like(x) if y is not None else x
    norm = torch.empty_like(x)
    _lib().phrasal_add_layer_norm(x.data_ptr(), y.data_ptr() if y is not None else None, n, d, weight.data_ptr(),
                                  bias.data_ptr(), eps, total.data_ptr(), norm.data_ptr())
    return total, norm


def select(values: torch.Tensor, index: torch.Tensor, vocab: int, eos_id: int, beams: int) -> tuple[torch.Tensor, ...]:
    """`model.decoding.selection.select` in one kernel call: its Selection's fields in order (scores,
    parent, token, finished, next_scores, next_tokens, next_parent), the same tensors bit for bit;
    values (n, C) float32 best first and index (n, C) int64 flat k·V + v, both contiguous."""
    _check(values, torch.float32, "values")
    _check(index, torch.int64, "index")
    n, count = values.shape
    if tuple(index.shape) != (n, count) or not values.is_contiguous() or not index.is_contiguous():
        raise ValueError(f"select: values {tuple(values.shape)} and index {tuple(index.shape)} must be contiguous and alike")
    parent, token = torch.empty(n, count, dtype=torch.long), torch.empty(n, count, dtype=torch.long)
    finished = torch.empty(n, beams, dtype=torch.bool)
    next_scores = torch.empty(n, beams)
    next_tokens, next_parent = torch.empty(n, beams, dtype=torch.long), torch.empty(n, beams, dtype=torch.long)
    if _lib().phrasal_select(values.data_ptr(), index.data_ptr(), n, count, vocab, eos_id, beams, parent.data_ptr(),
                             token.data_ptr(), finished.data_ptr(), next_scores.data_ptr(), next_tokens.data_ptr(),
                             next_parent.data_ptr()):
        raise ValueError(f"cannot select {beams} beams from {count} candidates over {vocab} tokens")
    return values, parent, token, finished, next_scores, next_tokens, next_parent
