"""Pure math of the attentive source-phrase representations (Xu et al., 2020, "Learning Source
Phrase Representations for NMT", §3): fixed chunking, attentive pooling (and the plain mean / max
pooling of the ablation), the attentive combination, transparent mixing, and the phrase table the
decoder's phrase attention is reported in. No parameters here.

Layout: a phrase lives at the position of its first token. `chunks` (B, S) int64 holds, at each
chunk start j, the real length of the chunk that starts there, and 0 everywhere else; phrase
vectors are (B, S, D) with zero rows where no chunk starts. Keeping phrases on the source axis
(rather than packing them into ⌈S/ntok⌉ slots) means that every phrase tensor's size follows
the source length alone: a sentence alone and the same sentence padded in a batch see the
same chunks at the same places, beam reordering is one index_select, and exported graphs see
only the "src_len" axis (the number of chunks of a row depends on its data, not on S).

Every function is vectorised over the batch: each row has its own real length L and its own
chunk width ntok; nothing loops over sentences or positions.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from model.attention.functional import dropout, masked_softmax

# ntok = max(min(MAX, ⌈L / DIVISOR⌉), MIN) tokens per chunk (Xu et al. §3.1, dynamic chunk size).
MAX_CHUNK = 8
MIN_CHUNK = 3
LENGTH_DIVISOR = 6
GLANCES = ("max", "mean")
# How a chunk becomes one vector: the attentive representation (eq. 1-4), or a plain mean / max (ablation).
POOLINGS = ("attentive", "mean", "max")
# σ of the attentive combination (eq. 7-8): the paper's sigmoid (eq. 3), or ReLU as in a Transformer FFN.
ACTIVATIONS = ("sigmoid", "relu")


def tokens_per_chunk(lengths: torch.Tensor) -> torch.Tensor:
    """ntok = max(min(8, ⌈L/6⌉), 3) for every row: lengths (B,) int -> (B,) int64."""
    ceil = torch.div(lengths.long() + LENGTH_DIVISOR - 1, LENGTH_DIVISOR, rounding_mode="floor")  # ⌈L/6⌉ in integers
    return ceil.clamp(min=MIN_CHUNK, max=MAX_CHUNK)


def fixed_chunks(pad_mask: torch.Tensor) -> torch.Tensor:
    """The fixed segmentation of right-padded sources: pad_mask (B, S), True at padding -> chunks (B, S) int64.

    Row b with L real tokens is cut into [0, ntok), [ntok, 2·ntok), …; the last chunk keeps only
    its real tokens (L - start), so chunks[b, j] = min(ntok, L - j) at every start j < L and 0
    elsewhere. Chunk slots that would lie wholly on padding do not exist (0), which is the mask.
    """
    lengths = (~pad_mask).sum(dim=1)  # (B,)
    width = tokens_per_chunk(lengths)  # (B,)
    positions = torch.arange(pad_mask.shape[1], device=pad_mask.device).unsqueeze(0)  # (1, S)
    starts = positions.remainder(width.unsqueeze(1)).eq(0) & (positions < lengths.unsqueeze(1))  # (B, S)
    sizes = torch.minimum(width.unsqueeze(1), lengths.unsqueeze(1) - positions)  # (B, S)
    return torch.where(starts, sizes, torch.zeros_like(sizes))


def chunk_members(chunks: torch.Tensor) -> torch.Tensor:
    """(B, S) -> (B, S, MAX_CHUNK) bool: [b, j, m] True when token j+m belongs to the chunk starting at j."""
    offsets = torch.arange(MAX_CHUNK, device=chunks.device)  # (W,)
    return offsets < chunks.unsqueeze(-1)  # (B, S, W)


def chunk_windows(x: torch.Tensor) -> torch.Tensor:
    """x (B, S, C) -> (B, S, MAX_CHUNK, C): [b, j, m] = x[b, j+m], zero rows past the end."""
    padded = F.pad(x, (0, 0, 0, MAX_CHUNK - 1))  # (B, S+W-1, C)
    return padded.unfold(1, MAX_CHUNK, 1).transpose(2, 3)  # (B, S, W, C)


def glance(windows: torch.Tensor, members: torch.Tensor, kind: str) -> torch.Tensor:
    """The glance vector of every chunk, mean or max over its real tokens (Xu et al. eq. 1).

    windows (B, S, W, D), members (B, S, W) -> (B, S, D); rows where no chunk starts are 0.
    """
    keep = members.unsqueeze(-1)  # (B, S, W, 1)
    if kind == "mean":
        total = windows.masked_fill(~keep, 0.0).sum(dim=2)  # (B, S, D)
        count = members.sum(dim=2, keepdim=True).clamp(min=1)  # (B, S, 1)
        return total / count.to(windows.dtype)
    if kind == "max":
        lowest = torch.finfo(windows.dtype).min
        best = windows.masked_fill(~keep, lowest).amax(dim=2)  # (B, S, D)
        return torch.where(members.any(dim=2, keepdim=True), best, torch.zeros_like(best))
    raise ValueError(f"glance must be one of {', '.join(GLANCES)}, got {kind!r}")


def attentive_pool(
    x: torch.Tensor,
    chunks: torch.Tensor,
    kind: str,
    token_weight: torch.Tensor,
    glance_weight: torch.Tensor,
    hidden_bias: torch.Tensor,
    score_weight: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attentive phrase representation of every chunk (Xu et al. §3.1, eq. 1-4).

        g_j      = mean | max of x_k over the chunk's real tokens            (eq. 1, the glance)
        e_{j,k}  = W₂ σ(W₁ [x_k ; g_j] + b₁)                                  (eq. 2)
        α_{j,k}  = softmax over the chunk's real tokens k of e_{j,k}          (eq. 3)
        p_j      = Σ_k α_{j,k} x_k                                           (eq. 4)

    W₁ = [token_weight | glance_weight] (H, D) each, b₁ = hidden_bias (H,), W₂ = score_weight
    (1, H). W₂ has no bias: it would add the same constant to every score of a chunk and cancel
    in the softmax. W₁x is computed once per token and windowed, W₁g once per chunk.

    x (B, S, D), chunks (B, S) -> phrases (B, S, D) at chunk starts (0 elsewhere) and the pooling
    weights α (B, S, MAX_CHUNK) float32 (0 off the chunk's real tokens; rows sum to 1 at starts).
    """
    members = chunk_members(chunks)  # (B, S, W)
    windows = chunk_windows(x)  # (B, S, W, D)
    g = glance(windows, members, kind)  # (B, S, D)
    token_part = chunk_windows(F.linear(x, token_weight, hidden_bias))  # (B, S, W, H)
    glance_part = F.linear(g, glance_weight).unsqueeze(2)  # (B, S, 1, H)
    scores = F.linear(torch.sigmoid(token_part + glance_part), score_weight).squeeze(-1)  # (B, S, W)
    # A slot where no chunk starts has no member: its weights are 0 and its gradient finite.
    alpha = masked_softmax(scores, ~members, may_be_empty=True)  # (B, S, W) float32
    phrases = torch.einsum("bsw,bswd->bsd", alpha.to(x.dtype), windows)  # (B, S, D)
    return phrases, alpha


def plain_pool(x: torch.Tensor, chunks: torch.Tensor, kind: str) -> torch.Tensor:
    """Phrase vectors without attention, the pooling rows of Xu et al.'s ablation: the mean or the
    max of each chunk's real tokens (the glance of eq. 1 used as the phrase itself).

    x (B, S, D), chunks (B, S) -> phrases (B, S, D) at chunk starts, 0 elsewhere.
    """
    return glance(chunk_windows(x), chunk_members(chunks), kind)  # (B, S, D)


def attentive_combination(
    x: torch.Tensor,
    context: torch.Tensor,
    hidden_weight: torch.Tensor,
    hidden_bias: torch.Tensor,
    out_weight: torch.Tensor,
    out_bias: torch.Tensor,
    activation: str,
    dropout_p: float = 0.0,
    training: bool = False,
) -> torch.Tensor:
    """The attentive combination of a token stream and its phrase context (Xu et al. §3.2, eq. 7-8):

        out_phrase = MultiHeadAttention(x, phrases)                           (eq. 7, the caller's)
        update     = W₄ σ(W₃ [x | out_phrase] + b₃) + b₄                        (eq. 8)

    σ is the sigmoid (as the paper defines it, eq. 3) or, as a Transformer adaptation, ReLU.
    W₃ = hidden_weight (F, 2D), b₃ = hidden_bias (F,), W₄ = out_weight (D, F), b₄ = out_bias (D,);
    dropout (activation dropout) acts on σ(...) in training. x, context (…, D) -> update (…, D),
    which the layer adds to its residual stream.
    """
    pre = F.linear(torch.cat([x, context], dim=-1), hidden_weight, hidden_bias)  # (…, F)
    if activation == "sigmoid":
        hidden = torch.sigmoid(pre)
    elif activation == "relu":
        hidden = F.relu(pre)
    else:
        raise ValueError(f"activation must be one of {', '.join(ACTIVATIONS)}, got {activation!r}")
    hidden = dropout(hidden, dropout_p, training)
    return F.linear(hidden, out_weight, out_bias)


def transparent_weights(logits: torch.Tensor) -> torch.Tensor:
    """One decoder layer's mix over the K encoder-side phrase representations: softmax of its
    K logits (transparent attention, Bapna et al. 2018, as Xu et al. §3.2 use it)."""
    return torch.softmax(logits.float(), dim=-1)


def transparent_mix(phrases: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """phrases (B, K, S, D) from every encoder layer, logits (K,) -> Σ_k softmax(logits)_k · phrases_k (B, S, D)."""
    weights = transparent_weights(logits).to(phrases.dtype)  # (K,)
    return torch.einsum("bksd,k->bsd", phrases, weights)


def chunk_phrase_table(probs: torch.Tensor, chunks: torch.Tensor) -> torch.Tensor:
    """Attention over chunk starts -> the phrase table that model/alignments/attention_phrases.py reads.

    probs (B, …, S): weight of the chunk starting at j; chunks (B, S) -> (B, …, MAX_CHUNK, S) with
    the weight at [n-1, j] for a chunk starting at j of real length n, and 0 elsewhere.
    """
    sizes = torch.arange(1, MAX_CHUNK + 1, device=chunks.device).view(1, MAX_CHUNK, 1)  # (1, W, 1)
    one_hot = chunks.unsqueeze(1).eq(sizes).to(probs.dtype)  # (B, W, S)
    middle = (1,) * (probs.dim() - 2)
    return probs.unsqueeze(-2) * one_hot.view(chunks.shape[0], *middle, MAX_CHUNK, chunks.shape[1])  # (B, …, W, S)
