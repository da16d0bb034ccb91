"""Label-smoothed cross-entropy over the target tokens, padding ignored."""
from __future__ import annotations

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
