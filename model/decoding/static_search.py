"""Beam search with fixed shapes and no host synchronisation per step (model/decoding/static_decoding.py).

The same search as `model.decoding.beam_search.beam_search` (its docstring states the rules; each
step's choice is the one function `model.decoding.selection.select_step`: 2K candidates per
sentence by one topk, EOS finishes a hypothesis only within the first K; at most K finished per
sentence, a sentence stops when it has K, no live beam, or reached its max length; score =
log_prob / lp(len), model/decoding/length_penalty.py), written so that every step is a fixed set of
device ops on preallocated tensors:

- no sentence leaves the batch within a step: a finished sentence turns inactive and its beams'
  scores -inf, so it yields no more hypotheses (its rows keep being computed, their results
  ignored, until the caller moves the active ones to a smaller search with `take`);
- a finished hypothesis is recorded as (step, parent beam, log-prob) into one of K slots per
  sentence, scattered by rank; slot K is a sink for candidates that are not kept;
- tokens and attention rows are not carried along the beams: every step records its chosen
  tokens, parent beams and attention rows, and `hypotheses` walks the parents back once at the
  end (the same rows the eager search copies at every step, so the same numbers).

Hence a step never reads a value on the host; the caller asks `all_done` every few steps.
"""
from __future__ import annotations

import torch

from model.decoding.beam_search import Hypothesis
from model.decoding.length_penalty import length_normaliser
from model.decoding.selection import NEG_INF, select_step


class StaticSearch:
    """The search state of B sentences x K beams over at most `steps` steps, on `device`.

    max_lengths (B,) int64: each sentence's max length (EOS not counted); `live` (B,) bool: False
    for padding rows of a bucket, which never start. rows: the per-row attention tensors to
    record, name -> trailing shape (e.g. {"attention": (S,)}); float32.
    """

    def __init__(self, batch: int, beam: int, steps: int, vocab: int, eos_id: int, max_lengths: torch.Tensor,
                 live: torch.Tensor, rows: dict[str, tuple[int, ...]]):
        device = max_lengths.device
        self.B, self.K, self.V, self.steps, self.eos_id = batch, beam, vocab, steps, eos_id
        self.max_lengths = torch.zeros(batch, dtype=torch.long, device=device)  # (B,)
        self.active = torch.zeros(batch, dtype=torch.bool, device=device)  # (B,) still searching
        self.scores = torch.zeros(batch, beam, device=device)  # (B, K) cumulative log-probs
        self.n_finished = torch.zeros(batch, dtype=torch.long, device=device)  # (B,)
        # Slots 0..K-1 hold finished hypotheses in finishing order; slot K swallows the rest.
        self.finished_step = torch.zeros(batch, beam + 1, dtype=torch.long, device=device)  # (B, K+1)
        self.finished_parent = torch.zeros(batch, beam + 1, dtype=torch.long, device=device)  # (B, K+1)
        self.finished_log_prob = torch.zeros(batch, beam + 1, device=device)  # (B, K+1)
        self.chosen = torch.zeros(steps, batch, beam, dtype=torch.long, device=device)  # token that made beam k
        self.parents = torch.zeros(steps, batch, beam, dtype=torch.long, device=device)  # its parent beam
        self.rows = {name: torch.zeros(steps, batch * beam, *shape, device=device) for name, shape in rows.items()}
        self.group_start = torch.arange(batch, device=device).unsqueeze(1) * beam  # (B, 1) first row of a sentence
        self.rank = torch.arange(beam, device=device)  # (K,)
        self.sink = torch.full((batch, beam), beam, dtype=torch.long, device=device)  # (B, K) slot K
        self.all_done = torch.zeros((), dtype=torch.bool, device=device)
        self.reset(max_lengths, live)

    def reset(self, max_lengths: torch.Tensor, live: torch.Tensor) -> "StaticSearch":
        """A new batch of the same shape, written into the same tensors (CUDA graphs read them)."""
        self.max_lengths.copy_(max_lengths)
        self.active.copy_(live)
        self.scores.fill_(NEG_INF)
        self.scores[:, 0].masked_fill_(live, 0.0)
        self.n_finished.zero_()
        self.all_done.zero_()
        return self

    def take(self, source: "StaticSearch", sentences: torch.Tensor, real: int, steps_done: int) -> None:
        """Become the search of `source`'s sentences `sentences` (B',) after `steps_done` steps;
        positions `real`.. are padding that never searches (a smaller bucket's search, made to
        carry on the sentences still active)."""
        K = self.K
        rows = (sentences.unsqueeze(1) * K + torch.arange(K, device=sentences.device)).flatten()  # (B'·K,)
        for name in ("max_lengths", "active", "scores", "n_finished", "finished_step", "finished_parent",
                     "finished_log_prob"):
            getattr(self, name).copy_(getattr(source, name).index_select(0, sentences))
        self.chosen[:steps_done].copy_(source.chosen[:steps_done].index_select(1, sentences))
        self.parents[:steps_done].copy_(source.parents[:steps_done].index_select(1, sentences))
        for name, recorded in self.rows.items():
            recorded[:steps_done].copy_(source.rows[name][:steps_done].index_select(1, rows))
        self.active[real:] = False
        self.scores[real:] = NEG_INF
        self.all_done.copy_(~self.active.any())

    def advance(self, t: int, log_probs: torch.Tensor, rows: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Step t: log_probs (B·K, V) float32 of the current rows, their attention rows by name.
        Updates the state in place; returns the next tokens (B·K,) and the parent rows (B·K,)
        that the decoder state must be reordered by."""
        K = self.K
        for name, recorded in self.rows.items():
            recorded[t].copy_(rows[name])
        chosen = select_step(self.scores, log_probs, self.eos_id, self.max_lengths <= t)
        top_scores, parent, next_scores = chosen.scores, chosen.parent, chosen.next_scores
        next_tokens, next_parent = chosen.next_tokens, chosen.next_parent
        final = chosen.finished & self.active.unsqueeze(1)  # (B, K)

        # The finals of a step take the free slots in rank order; those beyond K go to the sink.
        slot = self.n_finished.unsqueeze(1) + final.long().cumsum(1) - 1  # (B, K)
        taken = final & (slot < K)
        slot = torch.where(taken, slot, self.sink)
        self.finished_step.scatter_(1, slot, torch.full_like(slot, t))
        self.finished_parent.scatter_(1, slot, parent[:, :K])
        self.finished_log_prob.scatter_(1, slot, top_scores[:, :K])
        self.n_finished.add_(taken.sum(1))

        self.active &= (next_scores[:, 0] > NEG_INF) & (self.n_finished < K) & (self.max_lengths > t)
        self.scores.copy_(torch.where(self.active.unsqueeze(1), next_scores, NEG_INF))
        self.chosen[t].copy_(next_tokens)
        self.parents[t].copy_(next_parent)
        self.all_done.copy_(~self.active.any())
        return next_tokens.view(-1), (self.group_start + next_parent).view(-1)  # (B·K,) each

    def hypotheses(self, sentences: list[int], n_best: int, length_penalty: float, length_penalty_form: str,
                   row_slices: dict[str, tuple[slice, ...]] | None = None) -> list[list[Hypothesis]]:
        """The n-best of the sentences at these positions, as `beam_search` returns them: host
        lists, sorted by score (ties in finishing order); attention rows (when recorded) cut by row_slices."""
        K = self.K
        count = self.n_finished.tolist()
        steps = self.finished_step.tolist()
        parents_at_end = self.finished_parent.tolist()
        log_probs = self.finished_log_prob.tolist()
        last_step = max((steps[b][i] for b in sentences for i in range(count[b])), default=0)
        chosen = self.chosen[:last_step].tolist()  # (T, B, K) as lists: walked element by element below
        parents = self.parents[:last_step].tolist()
        recorded = {name: rows[: last_step + 1].cpu() for name, rows in self.rows.items()}
        cut = row_slices or {}
        out: list[list[Hypothesis]] = []
        for b in sentences:
            found: list[Hypothesis] = []
            for i in range(count[b]):
                step, beam, lp = steps[b][i], parents_at_end[b][i], log_probs[b][i]
                tokens, history = [], []  # walked back from the last step
                for u in range(step - 1, -1, -1):
                    tokens.append(chosen[u][b][beam])
                    beam = parents[u][b][beam]
                    history.append(beam)
                tokens.reverse()
                history.reverse()  # the row of every step 0..step-1 on this hypothesis' path
                attention = final = None
                if recorded:
                    path = torch.tensor(history, dtype=torch.long) + b * K
                    last = b * K + parents_at_end[b][i]
                    attention = {n: r[torch.arange(step), path][(slice(None), *cut.get(n, ()))] for n, r in recorded.items()}
                    final = {n: r[step, last][cut.get(n, ())] for n, r in recorded.items()}
                normaliser = length_normaliser(step + 1, length_penalty, length_penalty_form)  # len counts EOS
                found.append(Hypothesis(tokens, lp / normaliser, lp, attention, final))
            out.append(sorted(found, key=lambda h: -h.score)[:n_best])
        return out
