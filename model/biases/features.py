"""Pure feature math of the structural alignment biases (Cohn et al., 2016, §3.1-§3.3). No parameters.

The RNN-era features are made parallel for a Transformer by reading the SAME layer's unbiased
cross-attention probabilities α (softmax of the inner logits without any bias):
- the previous step's attention α_{t-1} is α shifted by one target step (zeros at t = 0),
- the coverage Σ_{t'<t} α_{t'} is the cumulative sum of that shifted α over the target.
Incremental decoding carries the same two quantities as state (`model.biases.history`), so a step
sees exactly what the full pass computed for its row.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def previous_step(probs: torch.Tensor) -> torch.Tensor:
    """α (B, H, T, S) -> α_{t-1} at each t (B, H, T, S); zeros at t = 0 (nothing attended yet)."""
    return F.pad(probs, (0, 0, 1, 0))[:, :, :-1]  # (B, H, T, S): row t holds row t-1


def coverage(probs: torch.Tensor) -> torch.Tensor:
    """α (B, H, T, S) -> Σ_{t'<t} α_{t'} (B, H, T, S), the attention summed over all earlier steps
    (the local-fertility signal, Cohn et al. §3.3)."""
    return torch.cumsum(previous_step(probs), dim=2)  # (B, H, T, S)


def window(x: torch.Tensor, k: int) -> torch.Tensor:
    """ξ_k(x; i) = [x_{i-k}, ..., x_{i+k}] for every source position i (Cohn et al. §3.2, the
    Markov window; §3.3 applies it to the coverage). x (..., S) -> (..., S, 2k+1), zero where
    i+o falls outside [0, S). Padding needs no masking here: attention is exactly 0 there.
    """
    s = x.shape[-1]
    padded = F.pad(x, (k, k))  # (..., S + 2k)
    return torch.stack([padded[..., o : o + s] for o in range(2 * k + 1)], dim=-1)  # (..., S, 2k+1)


def position_features(target_positions: torch.Tensor, lengths: torch.Tensor, source_len: int) -> torch.Tensor:
    """ψ(i, t, S) = [log(1+i), log(1+t), log(1+S)] (Cohn et al. §3.1, the position bias), 0-based i, t.

    target_positions (B|1, T) the target step of each query row; lengths (B,) the real (unpadded)
    source length of each sentence; source_len the padded width. Returns (B, T, S, 3) fp32.
    """
    b = lengths.shape[0]
    t_len = target_positions.shape[1]
    i = torch.arange(source_len, device=lengths.device, dtype=torch.float32).view(1, 1, source_len)  # (1, 1, S)
    t = target_positions.float().view(-1, t_len, 1)  # (B|1, T, 1)
    n = lengths.float().view(b, 1, 1)  # (B, 1, 1)
    shape = (b, t_len, source_len)
    return torch.stack(
        [torch.log1p(i).expand(shape), torch.log1p(t).expand(shape), torch.log1p(n).expand(shape)], dim=-1
    )  # (B, T, S, 3)
