"""Pure attention math shared by the attention modules (no parameters here)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def inference_constants_allowed() -> bool:
    """Whether a tensor computed from a module's constant buffers and the input's shape alone (an index
    table) may be kept and reused across calls: no gradient is being recorded, and no tracer
    (torch.jit.trace, torch.export, torch.compile) is recording the operations that make it (a kept
    tensor would enter its graph as a constant). A decoding step then dispatches only what depends on
    its input: the eager search on the CPU spends most of a small model's step dispatching operators,
    and every one is a kernel in a CUDA-graph replay."""
    return not torch.is_grad_enabled() and not torch.jit.is_tracing() and not torch.compiler.is_compiling()


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)  # (B, H, T, dh)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)  # (B, T, D)


def attention_mask(
    key_padding_mask: torch.Tensor | None, q_len: int, k_len: int, causal: bool, device: torch.device
) -> torch.Tensor | None:
    """Boolean mask (B|1, 1, T, S), True where a query may attend to a key.

    With causal=True the T queries are the LAST T positions of the S keys, so a step decoded
    incrementally (T=1) sees every cached key and a full pass sees only the past.
    """
    mask = None
    if causal:
        offset = k_len - q_len
        q_pos = torch.arange(q_len, device=device).unsqueeze(1) + offset
        k_pos = torch.arange(k_len, device=device).unsqueeze(0)
        mask = (k_pos <= q_pos).view(1, 1, q_len, k_len)
    if key_padding_mask is not None:
        keep = (~key_padding_mask).view(key_padding_mask.shape[0], 1, 1, k_len)
        mask = keep if mask is None else mask & keep
    return mask


def scaled_dot_product_probs(
    q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None, scale: float | None = None
) -> torch.Tensor:
    """softmax(QKᵀ/√dₕ) with masked keys at probability 0 (Vaswani et al., eq. 1). Computed in fp32."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = torch.matmul(q.float(), k.float().transpose(-2, -1)) * scale  # (B, H, T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    # A query whose keys are all masked (never for a real sentence: sources end in EOS) gets zeros, not NaN.
    return torch.nan_to_num(probs, nan=0.0)


def masked_softmax(scores: torch.Tensor, hidden: torch.Tensor | None, may_be_empty: bool = False) -> torch.Tensor:
    """softmax over the last dim in fp32, with the `hidden` entries (True) at exactly 0.

    `hidden` has the convention of key_padding_mask and of every mask handed to a softmax here
    (hidden n-grams, chunk slots without a member): True where an entry must NOT be attended
    to; it broadcasts against scores. (Only `attention_mask` is the other way round, True where a query
    may attend: the convention of F.scaled_dot_product_attention, which it feeds.)

    may_be_empty: some row may hide every entry (a source shorter than every n of a head); such
    a row gets all zeros, and its gradient stays finite (the softmax runs over the whole row and
    is zeroed after).
    """
    scores = scores.float()
    if hidden is None:
        return torch.softmax(scores, dim=-1)
    if not may_be_empty:
        return torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)
    empty = hidden.all(dim=-1, keepdim=True)  # (…, 1)
    probs = torch.softmax(scores.masked_fill(hidden & ~empty, float("-inf")), dim=-1)
    return probs.masked_fill(empty, 0.0)


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """`F.dropout(x, p, training)`, without any call when it is the identity (eval mode or p = 0):
    decoding would otherwise dispatch ~18 no-op dropouts a step, each host time on a
    launch-bound GPU host (benchmarks/decode_speed.py --profile counts them)."""
    return F.dropout(x, p, True) if training and p > 0 else x
