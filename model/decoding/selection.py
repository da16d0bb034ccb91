"""One beam search step's choice, the same for every search: the eager loop
(model/decoding/beam_search.py), the fixed-shape one (model/decoding/static_search.py) and the C
kernels (model/cpu_kernels, whose `beam_candidates` replaces `candidates` below and whose
`phrasal_select` computes `select` in one call: tests/model/test_selection.py holds both to these).

Per sentence of K beams over V tokens, from the beams' cumulative log-probs (n, K) and the
step's log-probs (n·K, V):

1. `candidates`: the 2K best (beam, token) pairs by cumulative log-prob, best first (one topk
   over K·V, fairseq); a sentence at its length limit may only end: its non-EOS tokens are -inf.
2. `select`: a candidate ending in EOS finishes a hypothesis only if it ranks within the first K
   (and is not -inf); the K best non-EOS candidates, in rank order, are the next beams. At most
   K of the 2K are EOS (one per beam), so an EOS is kept as a beam only when V is tiny, and then
   with score -inf (dead).

Pure functions of tensors: no host reads, fixed output shapes, so the static search can run them
inside a CUDA graph.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from model.decoding.top_candidates import top_candidates

NEG_INF = float("-inf")


@dataclass(frozen=True)
class Selection:
    """One step's choice for n sentences: C candidates each, K beams each."""

    scores: torch.Tensor  # (n, C) the candidates' cumulative log-probs, best first
    parent: torch.Tensor  # (n, C) the beam each candidate extends
    token: torch.Tensor  # (n, C) the token it appends
    finished: torch.Tensor  # (n, K) bool: candidate r < K ends a hypothesis (EOS, not -inf)
    next_scores: torch.Tensor  # (n, K) the next beams' cumulative log-probs (-inf: dead)
    next_tokens: torch.Tensor  # (n, K) their last tokens
    next_parent: torch.Tensor  # (n, K) the beam each of them extends


def candidate_count(beam: int, vocab: int) -> int:
    return min(2 * beam, beam * vocab)


def only_eos(log_probs: torch.Tensor, at_limit: torch.Tensor, eos_id: int) -> torch.Tensor:
    """log_probs (n·K, V) with every non-EOS token -inf in the rows of sentences at their limit;
    at_limit (n,) bool. A new tensor (the caller's log-probs may be a backend's buffer)."""
    n, V = at_limit.shape[0], log_probs.shape[1]
    not_eos = torch.arange(V, device=log_probs.device) != eos_id  # (V,)
    forced = at_limit.view(n, 1, 1) & not_eos  # (n, 1, V)
    return log_probs.view(n, -1, V).masked_fill(forced, NEG_INF).view(-1, V)


def candidates(scores: torch.Tensor, log_probs: torch.Tensor, eos_id: int,
               at_limit: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """scores (n, K) in the search's dtype, log_probs (n·K, V) -> the best candidate_count(K, V)
    per sentence: values (n, C) best first and flat indices k·V + v. at_limit (n,) bool or None
    (no sentence at its limit: the masking pass is skipped)."""
    K, V = scores.shape[1], log_probs.shape[1]
    lp = log_probs.to(scores.dtype)
    if at_limit is not None:
        lp = only_eos(lp, at_limit, eos_id)
    return top_candidates(scores, lp, candidate_count(K, V))


def select(top_scores: torch.Tensor, top_index: torch.Tensor, vocab: int, eos_id: int, beam: int) -> Selection:
    """The step's choice from its candidates (values (n, C) best first, flat indices k·V + v)."""
    K = beam
    parent = top_index // vocab
    token = top_index % vocab
    is_eos = token == eos_id
    finished = is_eos[:, :K] & (top_scores[:, :K] > NEG_INF)
    # A stable sort puts the non-EOS candidates first, in rank order.
    keep = is_eos.to(torch.uint8).argsort(dim=1, stable=True)[:, :K]  # (n, K)
    next_scores = top_scores.gather(1, keep).masked_fill(is_eos.gather(1, keep), NEG_INF)
    return Selection(top_scores, parent, token, finished, next_scores, token.gather(1, keep), parent.gather(1, keep))


def select_step(scores: torch.Tensor, log_probs: torch.Tensor, eos_id: int,
                at_limit: torch.Tensor | None = None) -> Selection:
    """`candidates` then `select`: one step of the search, by definition."""
    values, index = candidates(scores, log_probs, eos_id, at_limit)
    return select(values, index, log_probs.shape[1], eos_id, scores.shape[1])
