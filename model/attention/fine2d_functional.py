"""Pure math of fine-grained (2D) attention in a Transformer head (no parameters here).

Choi, Cho & Bengio, "Fine-Grained Attention Mechanism for Neural Machine Translation"
(arXiv:1803.11407, §3) give every dimension d of a context vector its own score and its own
softmax over the source positions:

    e^d_{t',t} = f^d_AttY2D(z_{t'-1}, h_t, y_{t'-1})                         (eq. 7)
    α^d_{t',t} = exp(e^d_{t',t}) / Σ_k exp(e^d_{t',k})                        (eq. 8)
    c_{t'}     = Σ_t α_{t',t} ⊙ h_t                                           (eq. 9)

In a head with queries q (T, dₕ), keys k and values v (S, dₕ), the score of dimension d is the
d-th term of the dot product plus a learned key-only term r (a projection of the keys' input, one
number per dimension: the h_t-only part of the paper's score network f^d; a bias that is the same
for every source position would cancel in the softmax of eq. 8), times a scale τ:

    e[t, s, d] = τ · (q[t, d]·k[s, d] + r[s, d])                                (eq. 7)
    α[t, s, d] = softmax over s of e[t, s, d]                                   (eq. 8)
    c[t, d]    = Σ_s α[t, s, d] · v[s, d]                                       (eq. 9)

Vanilla attention divides a sum of dₕ products by √dₕ so that a logit's variance is that of one
product. A per-dimension logit sums one product, plus r when there is a key term, so the same rule
gives τ = 1/√(number of terms): 1 without the key term, 1/√2 with it (option scale "per_dimension",
the default); a fresh layer is then about as sharp as vanilla attention. τ = 1/√dₕ (scale
"sqrt_head_dim") divides the single product as if it were the full dot product: its logits have
about 1/√dₕ of vanilla's spread and a fresh layer attends almost uniformly
(benchmarks/fine2d_temperature.py measures both; results/fine2d_temperature.md).

The paper's own score (option score "mlp") is a one-hidden-layer network with one output per
dimension, f^d(z, h) = [W_o tanh(W_z z + W_h h + b)]_d (eq. 7, the 2D form of Bahdanau et al.'s
additive score). In a head, the projected query and key are W_z z and W_h h (their biases b):

    e[t, s, d] = Σ_j W_o[d, j] · tanh(q[t, j] + k[s, j])                        (eq. 7, f^d)

with one W_o (dₕ, dₕ) per head; an output bias would be the same at every s and cancel in eq. 8,
and no scale is applied (tanh is bounded; W_o's initialisation sets the spread). Its cost is a
(B, H, T, S, dₕ) hidden layer besides the scores and a dₕ x dₕ product per (t, s) pair.

The alignment of a (target, source) pair is α averaged over the dimensions (§5.2, A_{t,t'}).

Layout: scores are (B, H, dₕ, T, S), so that the softmax runs over the last dim and the context is
one batched matrix product (no (B, H, dₕ, T, S)-sized product with the values). Their size
B·H·dₕ·T·S (float32) is what bounds memory; `fine2d_attention_chunked` cuts the target positions
into chunks of at most `budget` score elements, each row computed exactly as unchunked.
"""
from __future__ import annotations

import math

import torch

from model.attention.functional import dropout as dropout_if_training

# Score elements (B·H·dₕ·T_chunk·S, float32: 128 MiB) computed at once by the chunked full pass.
CHUNK_ELEMENTS = 2**25


SCALES = ("per_dimension", "sqrt_head_dim")


def score_scale(kind: str, head_dim: int, key_term: bool) -> float:
    """τ of eq. 7 (module docstring): 1/√(terms per logit) for "per_dimension" (1, or 1/√2 with
    the key term), 1/√dₕ for "sqrt_head_dim"."""
    if kind == "per_dimension":
        return 1.0 / math.sqrt(2.0) if key_term else 1.0
    if kind == "sqrt_head_dim":
        return 1.0 / math.sqrt(head_dim)
    raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {kind!r}")


def fine2d_scores(q: torch.Tensor, k: torch.Tensor, r: torch.Tensor | None, scale: float = 1.0) -> torch.Tensor:
    """q (B, H, T, dₕ), k (B, H, S, dₕ), r (B, H, S, dₕ) or None -> e (B, H, dₕ, T, S) float32:
    e[t, s, d] = scale · (q[t, d]·k[s, d] + r[s, d]) (eq. 7)."""
    q_cols = (q.float() * scale).transpose(-2, -1).unsqueeze(-1)  # (B, H, dₕ, T, 1)
    k_rows = k.float().transpose(-2, -1).unsqueeze(-2)  # (B, H, dₕ, 1, S)
    if r is None:
        return q_cols * k_rows  # (B, H, dₕ, T, S)
    r_rows = (r.float() * scale).transpose(-2, -1).unsqueeze(-2)  # (B, H, dₕ, 1, S)
    return torch.addcmul(r_rows, q_cols, k_rows)  # (B, H, dₕ, T, S)


def fine2d_mlp_scores(q: torch.Tensor, k: torch.Tensor, score_weight: torch.Tensor) -> torch.Tensor:
    """The paper's score network f^d (eq. 7): q (B, H, T, dₕ), k (B, H, S, dₕ), score_weight W_o
    (H, dₕ, dₕ) -> e (B, H, dₕ, T, S) float32, e[t, s, d] = Σ_j W_o[d, j] tanh(q[t, j] + k[s, j])."""
    hidden = torch.tanh(q.float().unsqueeze(3) + k.float().unsqueeze(2))  # (B, H, T, S, dₕ)
    # Under autocast this product runs in bf16/fp16, as vanilla's QKᵀ does; the softmax stays float32.
    return torch.einsum("bhtsj,hdj->bhdts", hidden, score_weight.float()).float()  # (B, H, dₕ, T, S)


def fine2d_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    r: torch.Tensor | None,
    mask: torch.Tensor | None,
    dropout: float = 0.0,
    training: bool = False,
    need_weights: bool = False,
    scale: float = 1.0,
    score_weight: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Fine-grained attention of every query at once (eq. 7-9), logits times `scale` (τ); with
    score_weight W_o (H, dₕ, dₕ) the scores are the paper's network f^d instead (r and scale unused).

    q (B, H, T, dₕ); k, v, r (B, H, S, dₕ) (r None: no key term); mask (B|1, 1, T|1, S) True
    where a query may attend to a key (`functional.attention_mask`), or None. Returns the context
    (B, H, T, dₕ) in v's dtype and, with need_weights, α averaged over dimensions (B, H, T, S).

    Masked keys get probability exactly 0. A query whose keys are all masked gets a zero context
    and zero weights, not NaN: its softmax runs over its raw (unmasked) scores and is zeroed after
    the reductions, so no extra (B, H, dₕ, T, S) pass is spent on it and its gradient stays finite.
    No data-dependent Python control flow: exported decoder steps run this as traced.
    """
    if score_weight is None:
        scores = fine2d_scores(q, k, r, scale)  # (B, H, dₕ, T, S)
    else:
        scores = fine2d_mlp_scores(q, k, score_weight)  # (B, H, dₕ, T, S)
    keep_row = None
    if mask is not None:
        hidden = ~mask  # (B|1, 1, T|1, S)
        empty = hidden.all(dim=-1, keepdim=True)  # (B|1, 1, T|1, 1)
        scores = scores.masked_fill((hidden & ~empty).unsqueeze(2), float("-inf"))  # mask (B|1, 1, 1, T|1, S)
        keep_row = (~empty).to(scores.dtype)  # (B|1, 1, T|1, 1)
    alpha = torch.softmax(scores, dim=-1)  # (B, H, dₕ, T, S)  eq. 8
    mixed = dropout_if_training(alpha, dropout, training)
    context = torch.matmul(mixed.to(v.dtype), v.transpose(-2, -1).unsqueeze(-1))  # (B, H, dₕ, T, 1)  eq. 9
    context = context.squeeze(-1).transpose(-2, -1)  # (B, H, T, dₕ)
    # The mean over dimensions accumulates in float64: its order of summation, which torch picks by
    # the tensor's shape, then cannot change the float32 result, so chunks give the unchunked numbers.
    probs = alpha.sum(dim=2, dtype=torch.float64).div(alpha.shape[2]).float() if need_weights else None  # (B, H, T, S)  §5.2
    if keep_row is not None:
        context = context * keep_row.to(context.dtype)
        probs = probs * keep_row if probs is not None else None
    return context, probs


def target_chunk(batch: int, heads: int, source_len: int, head_dim: int, budget: int) -> int:
    """How many target positions fit in `budget` score elements (at least one)."""
    return max(1, budget // max(1, batch * heads * head_dim * source_len))


def fine2d_attention_chunked(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    r: torch.Tensor | None,
    mask: torch.Tensor | None,
    dropout: float = 0.0,
    training: bool = False,
    need_weights: bool = False,
    budget: int = CHUNK_ELEMENTS,
    scale: float = 1.0,
    score_weight: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`fine2d_attention` over chunks of target positions, at most `budget` score elements each.

    Every target position is computed independently (eq. 7-9 never mix positions t), so the
    chunks give the numbers of the unchunked call (dropout aside: each chunk draws its own mask).
    """
    b, h, t, dh = q.shape
    # The score network's hidden layer is a second (B, H, T, S, dₕ) tensor: half the rows per chunk.
    rows = target_chunk(b, h, k.shape[2], dh, budget if score_weight is None else budget // 2)
    if rows >= t:
        return fine2d_attention(q, k, v, r, mask, dropout, training, need_weights, scale, score_weight)
    contexts, probs = [], []
    for start in range(0, t, rows):
        stop = min(start + rows, t)
        chunk_mask = mask if mask is None or mask.shape[2] == 1 else mask[:, :, start:stop]  # (B|1, 1, rows|1, S)
        context, p = fine2d_attention(
            q[:, :, start:stop], k, v, r, chunk_mask, dropout, training, need_weights, scale, score_weight
        )
        contexts.append(context)  # (B, H, rows, dₕ)
        probs.append(p)  # (B, H, rows, S) or None
    return torch.cat(contexts, dim=2), (torch.cat(probs, dim=2) if need_weights else None)  # (B, H, T, dₕ), (B, H, T, S)
