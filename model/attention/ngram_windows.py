"""Pure n-gram window math shared by the n-gram attention kinds (no parameters here).

Conventions (Nguyen & Joty, "Phrase-Based Attentions", §3.1: convolutions left zero-padded so
that there is one n-gram per position):

- The n-gram at index s is the window of rows s-n+1 .. s (it ENDS at s). Rows before 0 are
  zeros. Its start in the sentence is s-n+1, its length n.
- Several n-gram sizes are laid out "size-major": a tensor (…, G, S) holds, at [g, s], the
  n-gram of size ngrams[g] that ends at s; flattened it is (…, G·S).

Which n-grams exist (the mask rule), chosen by the option `edge` (ngram_options.py):

- Source side (encoder self-attention keys and queries, cross-attention keys), edge "inside":
  an n-gram is valid only when all its n rows are real tokens: it starts at 0 or later and
  touches no padding. A source shorter than n therefore has no n-gram of size n at all.
- Source side, edge "padded" (the left padding that "Phrase-Based Attentions" §3.2.1 requires
  of homogeneous heads): the windows that reach before position 0 exist too, their missing rows
  being the convolution's zero padding; only padding makes an n-gram invalid. Every real
  position then has one n-gram of every size, so a one-token source still has a bigram.
  Its weight belongs to the real tokens it covers (`spread_to_tokens`, `phrase_table`: the
  window ending at s < n-1 is the phrase 0..s).
- Target side (decoder self-attention keys, decoder-side n-gram queries): every window is
  valid; the zero rows before position 0 stand for "before BOS" and are the same in the full
  pass and in incremental decoding. Causality comes from the window END: a query at t sees
  only n-grams ending at s <= t, which contain no token after t.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def ngram_valid(pad_mask: torch.Tensor | None, length: int, n: int, device: torch.device, padded: bool = False) -> torch.Tensor:
    """Source-side rule: (B|1, S) True where the n-gram ending at s exists.

    pad_mask (B, S) is True at padding (None: no padding). The window must touch no padding and,
    unless `padded` (edge "padded"), start at 0 or later.
    """
    return ~source_invalid(pad_mask, length, (n,), device, padded).squeeze(1)


def source_invalid(
    pad_mask: torch.Tensor | None, length: int, ngrams: tuple[int, ...], device: torch.device, padded: bool = False,
) -> torch.Tensor:
    """(B|1, G, S) True where the n-gram of size ngrams[g] ending at s does NOT exist (source-side rule).

    Counted with one cumulative sum over [n_max rows before the sentence | padding]: a window
    is clean when the count does not change across it. The rows before the sentence count as
    bad for edge "inside" and as clean zero padding for edge "padded" (`padded`).
    """
    n_max = max(ngrams)
    if pad_mask is None:
        pad_mask = torch.zeros(1, length, dtype=torch.bool, device=device)
    bad = F.pad(pad_mask, (n_max, 0), value=not padded)  # (B, n_max+S): positions before 0
    count = bad.cumsum(dim=1)  # (B, n_max+S) int64
    ends = count[:, n_max:]  # (B, S): bad positions up to s
    if len(ngrams) == 1:
        return (ends != count[:, n_max - ngrams[0] : n_max - ngrams[0] + length]).unsqueeze(1)  # (B, 1, S)
    starts = torch.stack([count[:, n_max - n : n_max - n + length] for n in ngrams], dim=1)  # (B, G, S): up to s-n
    return ends.unsqueeze(1) != starts  # (B, G, S)


def source_key_mask(
    pad_mask: torch.Tensor | None, length: int, ngrams: tuple[int, ...], device: torch.device, padded: bool = False,
) -> torch.Tensor:
    """(B|1, 1, 1, G·S) True where a size-major n-gram of the sizes `ngrams` does NOT exist."""
    return source_invalid(pad_mask, length, ngrams, device, padded).flatten(1)[:, None, None, :]  # (B|1, 1, 1, G·S)


def causal_key_mask(q_len: int, k_len: int, groups: int, device: torch.device) -> torch.Tensor:
    """(1, 1, T, G·S) True where query t (the last T of S positions) must NOT see the n-gram:
    it ends after t."""
    q_pos = torch.arange(q_len, device=device).unsqueeze(1) + (k_len - q_len)
    k_pos = torch.arange(k_len, device=device).unsqueeze(0)
    future = (k_pos > q_pos).unsqueeze(1).expand(q_len, groups, k_len)  # (T, G, S)
    return future.reshape(1, 1, q_len, groups * k_len)  # (1, 1, T, G·S)


def fused_ngram_conv(x: torch.Tensor, weights: list[torch.Tensor], biases: list[torch.Tensor], offset: int = 0) -> torch.Tensor:
    """Several convolutions of widths n_i over the rows of x, as ONE matmul (the Conv_n of eq. 5-6).

    x (B, S, D); weights[i] (C_i, D, n_i) with taps ordered x_{s-n+1} … x_s (a projection is a
    width-1 convolution); blocks of equal width should be adjacent. Windows end at their own
    position and rows before 0 are zeros (left zero padding): out[:, s, c] = b_c + Σ_m W_c[:, m]·x_{s-n+1+m}.
    Narrower kernels are zero-padded on their left taps, so every block reads the same window
    (B, S, D·n_max) and the whole projection is one GEMM. Returns (B, S-offset, ΣC_i) for the
    positions offset..S-1.
    """
    widths = [w.shape[-1] for w in weights]
    n_max = max(widths)
    runs: list[torch.Tensor] = []
    start = 0
    while start < len(weights):  # pad each run of equal widths once
        stop = start
        while stop < len(weights) and widths[stop] == widths[start]:
            stop += 1
        run = weights[start] if stop - start == 1 else torch.cat(weights[start:stop], dim=0)
        runs.append(run if widths[start] == n_max else F.pad(run, (n_max - widths[start], 0)))
        start = stop
    weight = runs[0] if len(runs) == 1 else torch.cat(runs, dim=0)  # (ΣC, D, n_max)
    bias = biases[0] if len(biases) == 1 else torch.cat(biases)  # (ΣC,)
    if n_max == 1:
        return F.linear(x[:, offset:], weight.squeeze(-1), bias)  # (B, S-offset, ΣC)
    if offset >= n_max - 1:  # no window reaches before position 0 (a decoding step's rows hold its tail)
        windows = x.unfold(1, n_max, 1)[:, offset - (n_max - 1):]  # (B, S-offset, D, n_max)
    else:
        padded = F.pad(x, (0, 0, n_max - 1, 0))  # (B, n_max-1+S, D): zeros before position 0
        windows = padded.unfold(1, n_max, 1)[:, offset:]  # (B, S-offset, D, n_max): [b, s, d, m] = x_{s-n_max+1+m}
    flat = windows.reshape(windows.shape[0], windows.shape[1], -1)  # (B, S-offset, D·n_max)
    return F.linear(flat, weight.flatten(1), bias)  # (B, S-offset, ΣC)


def spread_to_tokens(probs: torch.Tensor, ngrams: tuple[int, ...], clipped: bool = False) -> torch.Tensor:
    """Token-level weights from n-gram weights: (…, G, S) -> (…, S).

    Each n-gram's weight is shared equally by its n tokens, so a row that sums to 1 over
    n-grams still sums to 1 over tokens. Token j receives weight/n from every n-gram of size n
    ending at j..j+n-1. A window ending at s < n-1 reaches before position 0: with `clipped`
    (source side, edge "padded") its weight is shared by its s+1 real tokens 0..s; otherwise
    (decoder side, where such windows stand for "before BOS") the share of the missing rows is dropped.
    """
    length = probs.shape[-1]
    tokens = None
    for g, n in enumerate(ngrams):
        p = probs[..., g, :]  # (…, S): n-gram ending at s
        if n > 1:
            ahead = F.pad(p, (0, n - 1))  # (…, S+n-1)
            spread = torch.stack([ahead[..., m : m + length] for m in range(n)], dim=-1).sum(-1) / n  # (…, S)
            if clipped:
                for end in range(min(n - 1, length)):  # tokens 0..end get 1/(end+1) of it, not 1/n
                    extra = p[..., end : end + 1] * (1.0 / (end + 1) - 1.0 / n)  # (…, 1)
                    spread = spread + F.pad(extra.expand(*extra.shape[:-1], end + 1), (0, length - end - 1))
            p = spread
        tokens = p if tokens is None else tokens + p
    return tokens


def phrase_table(probs: torch.Tensor, ngrams: tuple[int, ...], n_max: int, clipped: bool = False) -> torch.Tensor:
    """Start-indexed phrase weights: (…, G, S) -> (…, n_max, S).

    [.., n-1, j] is the weight of the source n-gram that starts at j and has length n (sizes not
    in `ngrams` stay 0). With edge "inside" windows starting before 0 carry no weight, so moving
    each n-gram from its end index to its start index drops nothing; with `clipped` (edge
    "padded") the window ending at s < n-1 is the phrase of its real tokens, start 0, length s+1.
    """
    length = probs.shape[-1]
    table = probs.new_zeros(*probs.shape[:-2], n_max, length)  # (…, n_max, S)
    for g, n in enumerate(ngrams):
        # index = start = end - (n-1); pad before the shift so that a source shorter than n-1 keeps width S
        table[..., n - 1, :] = F.pad(probs[..., g, :], (0, n - 1))[..., n - 1 :]
    if clipped:
        for g, n in enumerate(ngrams):
            for end in range(min(n - 1, length)):
                table[..., end, 0] = table[..., end, 0] + probs[..., g, end]
    return table


def strided_merge_windows(interleaved: torch.Tensor, window: int) -> torch.Tensor:
    """Windows of the strided merge convolution ("Phrase-Based Attentions", eq. 17): (B, 2T, C) -> (B, T, window·C).

    window 2, stride 2 (decoder side): output t sees [bigram(t-1, t), unigram(t)] — causal.
    window 3, stride 2 (encoder side): output t sees [bigram(t-1, t), unigram(t), bigram(t, t+1)],
    the row after the last one being zero padding.
    """
    b, rows, c = interleaved.shape
    t = rows // 2
    if window == 2:
        return interleaved.reshape(b, t, 2 * c)  # (B, T, 2C)
    padded = F.pad(interleaved, (0, 0, 0, 1))  # (B, 2T+1, C)
    following = padded[:, 2::2]  # (B, T, C): the bigram row after each unigram row
    return torch.cat([interleaved.reshape(b, t, 2 * c), following], dim=-1)  # (B, T, 3C)
