"""Training losses: label-smoothed cross-entropy, the global fertility loss, the bilingual trace bonus."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class LossOutput:
    loss: torch.Tensor      # scalar, label-smoothed loss per target token (what is back-propagated)
    nll: torch.Tensor       # scalar, detached negative log-likelihood per target token
    n_tokens: int           # non-pad target tokens the two are averaged over


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, *, smoothing: float = 0.1,
                        pad_id: int = 0, n_tokens: int | None = None) -> LossOutput:
    """logits (B, T, V), target (B, T) -> per-token loss and nll, summed then divided by the token count.

    torch's smoothing (Szegedy et al., 2016) spreads `smoothing` uniformly over all V classes:
    loss_t = (1 - eps) * -log p(y_t) + eps * mean_v -log p(v).
    The sum is normalised by target tokens, not by sentences, so long and short batches weigh
    each token the same. Pass `n_tokens` (the non-pad count of `target`) when it is already known
    on the host, to spare a device synchronisation.
    """
    vocab = logits.size(-1)
    flat_logits = logits.reshape(-1, vocab).float()  # (B*T, V); float32 even under bf16 autocast
    flat_target = target.reshape(-1)  # (B*T,)
    if n_tokens is None:
        n_tokens = int(flat_target.ne(pad_id).sum())
    denom = max(n_tokens, 1)
    loss = F.cross_entropy(flat_logits, flat_target, ignore_index=pad_id,
                           label_smoothing=smoothing, reduction="sum") / denom
    with torch.no_grad():
        nll = F.cross_entropy(flat_logits, flat_target, ignore_index=pad_id, reduction="sum") / denom
    return LossOutput(loss=loss, nll=nll, n_tokens=n_tokens)


def real_token_mask(ids: torch.Tensor, *special_ids: int) -> torch.Tensor:
    """True where `ids` holds none of `special_ids` (e.g. pad, or pad and EOS)."""
    mask = torch.ones_like(ids, dtype=torch.bool)
    for special in special_ids:
        mask &= ids.ne(special)
    return mask


def global_fertility_loss(attention: torch.Tensor, target_mask: torch.Tensor, source_mask: torch.Tensor,
                          mean: torch.Tensor, variance: torch.Tensor) -> torch.Tensor:
    """The global fertility loss of Cohn et al. (2016, "Fertility"): −log N(fᵢ; μᵢ, σ²ᵢ), fᵢ = Σₜ αₜᵢ.

    attention (B, T, S) rows = target positions, columns = source positions; target_mask (B, T) and
    source_mask (B, S) are True at the positions that count; mean and variance (B, S), variance > 0.
    fᵢ sums the rows where target_mask holds (the trainer passes tgt_out != pad: the EOS row counts,
    so Σᵢ fᵢ is the number of predicted tokens). The result is averaged over the source positions
    where source_mask holds, across the batch, so it does not grow with batch or sentence size;
    masked positions add nothing and get no gradient.
    """
    alpha = attention.float() * target_mask.unsqueeze(-1).to(torch.float32)  # (B, T, S)
    fertility = alpha.sum(dim=1)  # (B, S)
    variance = variance.float()
    nll = 0.5 * torch.log(2 * math.pi * variance) + (fertility - mean.float()).pow(2) / (2 * variance)  # (B, S)
    nll = torch.where(source_mask, nll, torch.zeros_like(nll))
    return nll.sum() / source_mask.sum().clamp(min=1)


def global_fertility_term(per_position: torch.Tensor, n_source: int, n_target: int, reduction: str) -> torch.Tensor:
    """The global fertility loss as it enters the objective, which is per target token.

    per_position: `global_fertility_loss`, Σᵢ −log N(fᵢ) / N_src over the batch's N_src real source
    positions; n_target: the N_tgt target tokens the cross-entropy is divided by.
    - "sum" (Cohn et al. §3.3): the paper adds Σᵢ log N(fᵢ; μᵢ, σ²ᵢ) summed over the source words to the
      log-likelihood summed over the target tokens; both divided by N_tgt: Σᵢ −log N(fᵢ) / N_tgt.
    - "mean": the per-position mean itself, Σᵢ −log N(fᵢ) / N_src.
    """
    if reduction == "mean":
        return per_position
    if reduction == "sum":
        return per_position * (n_source / max(n_target, 1))
    raise ValueError(f"unknown global fertility reduction {reduction!r}")


def sentence_traces(forward_attention: torch.Tensor, backward_attention: torch.Tensor,
                    source_words: torch.Tensor, target_words: torch.Tensor) -> torch.Tensor:
    """Per sentence pair, tr(α_{s→t}ᵀ α_{t→s}) restricted to real words (Cohn et al. 2016, "Bilingual symmetry"):

        tr_b = Σ_{i, j} α_{s→t}[b, j, i] · α_{t→s}[b, i, j]   over source words i and target words j.

    forward_attention (B, T, S): the s→t model, row j predicts target token j, column i is source
    token i. backward_attention (B, S, T): the t→s model, row i predicts source token i, column j
    is target token j. The trainer's batches line the two up (the s→t source x + [EOS] is the t→s
    target, and the other way round), so the masks source_words (B, S) and target_words (B, T),
    True at real words (not padding, not EOS; BOS never occurs in either), serve both. -> (B,)
    """
    pairs = (target_words.unsqueeze(2) & source_words.unsqueeze(1)).to(torch.float32)  # (B, T, S)
    product = forward_attention.float() * backward_attention.float().transpose(1, 2)  # (B, T, S)
    return (product * pairs).sum(dim=(1, 2))


def trace_bonus(forward_attention: torch.Tensor, backward_attention: torch.Tensor,
                source_words: torch.Tensor, target_words: torch.Tensor) -> torch.Tensor:
    """The batch's trace bonus: Σ_b tr_b / Σ_b (|x_b| + |y_b|) / 2, |x_b|, |y_b| = real words of each side.

    Normalised by the mean sentence length so that it lies in [0, 1] (tr_b <= min(|x_b|, |y_b|), as
    every attention row sums to at most 1 over real words), is symmetric in the two directions, and
    weighs like the per-token cross-entropies it is subtracted from: 1 means both models put all
    their mass on one and the same one-to-one alignment.
    """
    traces = sentence_traces(forward_attention, backward_attention, source_words, target_words)  # (B,)
    words = (source_words.sum() + target_words.sum()).to(torch.float32) / 2
    return traces.sum() / words.clamp(min=1)


def supervised_alignment_loss(attention: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Garg et al. (2019, eq. 5): −Σⱼ Gᵖ[t, j] · log A[t, j], averaged over the supervised rows t.

    attention (B, T, S): the supervised head's distributions; targets (B, T, S): the label rows, each
    normalised to sum to 1 over its linked source positions (Gᵖ), or all zeros for a row without
    links (not supervised: BOS, padding, an unaligned word). Only the linked positions enter the
    log, so padding (attention 0) never makes 0 · log 0; a linked position the head gives exactly
    0 costs −log(1e-9) instead of infinity.
    """
    targets = targets.float()
    linked = targets > 0
    log_attention = torch.log(attention.float().clamp_min(1e-9))
    terms = torch.where(linked, targets * log_attention, torch.zeros_like(targets))  # (B, T, S)
    rows = linked.any(dim=-1).sum()
    return -terms.sum() / rows.clamp(min=1)
