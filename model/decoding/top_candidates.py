"""The best continuations of a beam: topk over every (beam, token) candidate of a sentence.

Beam search extends each of a sentence's K beams by every token and keeps the `count` best
(beam, token) pairs by cumulative log-prob. Done literally, that adds the beam scores to all
K·V log-probs and runs one topk over K·V values per sentence. On a CPU both passes cost more than
the output projection of a small model (benchmarks/decode_speed.py --profile): the candidate
tensor is written once, read once, and topk reads it again slowly.

The blocked form reads the log-probs once, by blocks of `block` consecutive tokens: each block's
maximum plus its beam's score bounds every candidate in it, so the `count` best candidates lie
in the `count` blocks with the best bounds (a candidate outside them has `count` blocks whose
maxima are at least as good). Only those blocks are gathered and ranked. Float addition is
monotonic, so max(block) + score is exactly the best candidate of the block and the values
returned are the ones the literal form returns; only the order among exactly equal candidates
may differ, as it may between two runs of topk itself.
"""
from __future__ import annotations

from functools import lru_cache

import torch

# Blocks of about √V tokens balance the two passes; below MIN_VOCAB the literal form is as fast.
MIN_BLOCK, MAX_BLOCK = 32, 512
MIN_VOCAB = 2048


@lru_cache(maxsize=None)  # asked at every decoding step, with one vocabulary size per model
def block_size(vocab: int) -> int | None:
    """The divisor of `vocab` in [MIN_BLOCK, MAX_BLOCK] closest to √vocab, or None (literal form)."""
    if vocab < MIN_VOCAB:
        return None
    root = vocab**0.5
    divisors = [b for b in range(MIN_BLOCK, MAX_BLOCK + 1) if vocab % b == 0]
    return min(divisors, key=lambda b: (abs(b - root), b)) if divisors else None


def top_candidates(scores: torch.Tensor, log_probs: torch.Tensor, count: int,
                   blocked: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """scores (n, K) cumulative log-probs of the beams, log_probs (n·K, V) of their next tokens
    (rows sentence-major, in scores' dtype) -> the `count` best candidates of each sentence:
    values (n, count), best first, and flat indices k·V + v into (K, V).

    Equal to ``(scores[:, :, None] + log_probs.view(n, K, V)).view(n, K·V).topk(count)``.
    blocked: None picks the blocked form on the CPU when the vocabulary has a usable block size;
    on a GPU the literal form is one kernel where the blocked one launches several.
    """
    n, K = scores.shape
    V = log_probs.size(1)
    if blocked is None:
        blocked = log_probs.device.type == "cpu"
    block = block_size(V) if blocked else None
    if block is None or count * block * 4 > K * V:
        candidates = scores.unsqueeze(2) + log_probs.view(n, K, V)
        return candidates.view(n, K * V).topk(count, dim=1)
    n_blocks = V // block
    blocks = log_probs.view(n, K, n_blocks, block)
    bounds = blocks.amax(dim=3) + scores.unsqueeze(2)  # (n, K, n_blocks): the best candidate of each block
    best = bounds.view(n, K * n_blocks).topk(count, dim=1).indices  # (n, count) beam·n_blocks + block
    beam = best // n_blocks
    sentence = torch.arange(n, device=scores.device).unsqueeze(1)
    gathered = blocks[sentence, beam, best % n_blocks] + scores.gather(1, beam).unsqueeze(2)  # (n, count, block)
    values, position = gathered.view(n, count * block).topk(count, dim=1)
    chosen = best.gather(1, position // block)  # (n, count) beam·n_blocks + block of each winner
    return values, chosen * block + position % block
