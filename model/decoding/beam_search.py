"""Batched beam search over an incremental decoder (fairseq-style finalisation).

The search sees only log-probs and attention rows; the decoder owns its state and reorders it
when told (docs/design.md §3.5-3.6). One loop serves every backend that implements
`IncrementalDecoder` (model.decoding.generate.SearchDecoder over any step backend).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from model.decoding.length_penalty import length_normaliser
from model.decoding.options import DecodingOptions
from model.decoding.selection import NEG_INF, candidate_count, candidates, select


# Per-row values the search follows along the beam parents: one tensor (N, ...) or several by name.
Rows = torch.Tensor | dict[str, torch.Tensor]


class IncrementalDecoder(Protocol):
    def step(self, tokens: torch.Tensor) -> tuple[torch.Tensor, Rows | None]:
        """tokens (N,) long: the last token of every live row. Returns log_probs (N, V) float32
        and attention rows (N, S) (or None, or several per-row tensors by name) for that step."""
        ...

    def reorder(self, index: torch.Tensor) -> None:
        """Keep rows `index` (N',) long of the current N rows, in that order (N' may differ from N)."""
        ...


class RankingDecoder(IncrementalDecoder, Protocol):
    """A decoder that ranks the continuations itself (model/decoding/kernel_backend.py): its step
    returns the unnormalised logits (N, V) in place of log-probs, and `candidates` gives what
    `top_candidates` gives for their log-softmax, with the tokens it never generates at -inf and
    only EOS allowed in the groups `at_limit` (indices into the current groups of K rows)."""

    def candidates(self, logits: torch.Tensor, scores: torch.Tensor, count: int,
                   at_limit: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        ...


@dataclass
class Hypothesis:
    tokens: list[int]  # generated ids, without BOS and without EOS
    score: float  # length-normalised score used for ranking
    log_prob: float  # sum of token log-probs including EOS
    # (len(tokens), S) attention rows of the generated tokens (EOS row dropped); a dict of such
    # histories when the decoder returns several rows by name.
    attention: Rows | None
    # The row(s) of the step that predicted EOS, i.e. the step that READ the last token: shift-att
    # (align token k with the step that reads it) needs rows 1.. of `attention` and this one.
    final_attention: Rows | None = None
    # (len(tokens), n_max, S) when asked for: [t, n-1, j] = weight of the source n-gram starting at
    # j with length n (`model.alignments.attention_phrases.phrase_links` reads it).
    phrase_attention: torch.Tensor | None = None
    # (len(tokens) + 1, S) when asked for: the supervised alignment head's row of every step, the EOS
    # step last, so that row k + 1 is the step that reads token k (model/supervised_alignment.py).
    supervised_attention: torch.Tensor | None = None


def _map_rows(fn, rows: Rows) -> Rows:
    """fn applied to the one tensor, or to every tensor by name."""
    return {name: fn(t) for name, t in rows.items()} if isinstance(rows, dict) else fn(rows)


def _zip_rows(fn, a: Rows, b: Rows) -> Rows:
    return {name: fn(t, b[name]) for name, t in a.items()} if isinstance(a, dict) else fn(a, b)


def _follow(history: torch.Tensor, kept: torch.Tensor | None, parent: torch.Tensor) -> torch.Tensor:
    """history (n, K, ...) of the current beams -> (n', K, ...) of the next: row [g, k] is
    history[kept[g], parent[g, k]] (kept None: every group, in order)."""
    if kept is not None:
        history = history.index_select(0, kept)
    if parent.shape[1] == 1:  # one beam (greedy): its parent is itself
        return history
    index = parent.view(*parent.shape, *([1] * (history.dim() - 2))).expand(-1, -1, *history.shape[2:])
    return history.gather(1, index)


def _rows_ok(rows: Rows | None, n: int) -> bool:
    """One (n, S) tensor, or named tensors (n, ...) of rank 2 or more."""
    if rows is None or isinstance(rows, torch.Tensor):
        return rows is not None and rows.dim() == 2 and rows.size(0) == n
    return bool(rows) and all(t is not None and t.dim() >= 2 and t.size(0) == n for t in rows.values())


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_batch(batch_size: int, max_lengths: torch.Tensor) -> None:
    """The batch's own arguments; the search's options (beam size, n-best, length penalty) are a
    `DecodingOptions`, which checked them when it was made."""
    if not _is_int(batch_size) or batch_size < 0:
        raise ValueError(f"batch_size must be an integer >= 0, got {batch_size!r}")
    if not isinstance(max_lengths, torch.Tensor) or tuple(max_lengths.shape) != (batch_size,):
        shape = tuple(max_lengths.shape) if isinstance(max_lengths, torch.Tensor) else type(max_lengths).__name__
        raise ValueError(f"max_lengths must be a tensor of shape (batch_size,) = ({batch_size},), got {shape}")
    if max_lengths.is_floating_point() or max_lengths.is_complex() or max_lengths.dtype == torch.bool:
        raise ValueError(f"max_lengths must be an integer tensor, got {max_lengths.dtype}")
    if batch_size and int(max_lengths.min()) < 0:
        raise ValueError(f"max_lengths must be >= 0, got {int(max_lengths.min())}")


def beam_search(
    decoder: IncrementalDecoder,
    options: DecodingOptions,
    *,
    batch_size: int,
    bos_id: int,
    eos_id: int,
    max_lengths: torch.Tensor,
    return_attention: bool = False,
) -> list[list[Hypothesis]]:
    """Beam search for `batch_size` sentences with K = `options.beam_size` beams each, batched
    as rows; of the options it reads beam_size, n_best, length_penalty and length_penalty_form
    (max_lengths, per sentence, comes from the caller: `model.decoding.generate.max_lengths`).

    Rows start as batch_size*K, sentence-major (row b*K+k), all fed `bos_id`; on the
    first step only beam 0 of each sentence is live (the others start at -inf) so the K beams
    do not duplicate one hypothesis.

    Each step, per sentence, the 2K best (beam, token) candidates by cumulative log-prob are
    taken with one topk over K*V (fairseq). A candidate ending in EOS becomes a finished
    hypothesis only if it ranks within the first K candidates; the K best non-EOS candidates
    continue, and the decoder is told the surviving parent rows through `reorder`.

    Score of a finished hypothesis:
        score = log_prob / lp(len)
    where log_prob is the sum of token log-probs including EOS, len the number of generated
    tokens counting EOS, and lp (model/decoding/length_penalty.py) len ** length_penalty for
    length_penalty_form "power" (fairseq / CTranslate2) or ((5 + len) / 6) ** length_penalty
    for "gnmt" (Wu et al. 2016 eq. 14); length_penalty=0 ranks by raw log-prob. The penalty is
    applied only when a hypothesis finishes; the search itself ranks candidates by raw log-prob.

    Stopping: a sentence is done when it has K finished hypotheses (later EOS candidates
    of that step are ignored), when it has no live beam left, or after the step at which it
    reaches its max length: at step t == max_lengths[b] only EOS is allowed, so hypotheses hold
    at most max_lengths[b] tokens besides EOS. Rows of done sentences are dropped through
    `reorder` with a shorter index, so the decoder's work shrinks as sentences finish.

    Returns per sentence up to n_best finished hypotheses sorted by score, best first; ties keep
    finishing order (earlier step first, then candidate rank). Fewer than n_best come back only
    when the decoder gave -inf to every other continuation. With return_attention, each
    hypothesis carries the decoder's attention rows of its tokens, (len(tokens), S), followed
    along the beam parents, moved to the CPU (a dict of such histories when the decoder returns
    several per-row tensors by name); otherwise attention is None and nothing is kept.

    The BOS tokens of the first step are made on max_lengths.device; after that every tensor
    lives on the device of the log-probs the decoder returns. K = 1 is greedy (argmax)
    decoding.
    """
    validate_batch(batch_size, max_lengths)
    if batch_size == 0:
        return []
    K = options.beam_size
    finished: list[list[Hypothesis]] = [[] for _ in range(batch_size)]
    max_len_host = max_lengths.tolist()
    live = list(range(batch_size))  # sentence id of each live group of K rows, in row order
    tokens = torch.full((batch_size * K,), bos_id, dtype=torch.long, device=max_lengths.device)
    scores = hist = attn_hist = None
    # A decoder that ranks its own logits (RankingDecoder) gives the candidates itself (selection.candidates otherwise).
    ranked = getattr(decoder, "candidates", None)
    # A decoder may also choose in its own code (the C kernels'); selection.select defines the choice.
    choose = getattr(decoder, "select", None) or select
    first_rows_of: dict[int, torch.Tensor] = {}  # n -> each group's first row (n, 1), made once per n
    step = 0
    while True:
        log_probs, attn = decoder.step(tokens)
        n = len(live)
        if log_probs.dim() != 2 or log_probs.size(0) != n * K:
            raise ValueError(f"decoder.step returned log_probs of shape {tuple(log_probs.shape)}, expected ({n * K}, V)")
        if return_attention and not _rows_ok(attn, n * K):
            got = None if attn is None else _map_rows(lambda t: None if t is None else tuple(t.shape), attn)
            raise ValueError(f"return_attention=True needs decoder.step to return attention ({n * K}, S), got {got}")
        V = log_probs.size(1)
        device = log_probs.device
        if scores is None:
            dtype = torch.promote_types(log_probs.dtype, torch.float32)  # never accumulate in half precision
            scores = torch.full((n, K), NEG_INF, dtype=dtype, device=device)
            scores[:, 0] = 0.0
            hist = torch.empty((n, K, 0), dtype=torch.long, device=device)
            if return_attention:
                attn_hist = _map_rows(lambda a: a.new_empty((n, K, 0, *a.shape[1:])), attn)  # (n, K, t, S…)

        # Sentences at their max length may only end (selection.only_eos). Which ones are is known
        # on the host, and usually none is, so the (n·K, V) log-probs are only copied and masked
        # at a sentence's last step.
        at_limit = [gi for gi, s in enumerate(live) if max_len_host[s] <= step]
        if ranked is not None:
            values, index = ranked(log_probs, scores, candidate_count(K, V), at_limit)
        else:
            limit_mask = None
            if at_limit:
                limit_mask = torch.zeros(n, dtype=torch.bool, device=device)
                limit_mask[at_limit] = True
            values, index = candidates(scores, log_probs, eos_id, limit_mask)
        chosen = choose(values, index, V, eos_id, K)
        top_scores, parent, final = chosen.scores, chosen.parent, chosen.finished
        next_scores, next_tokens, next_parent = chosen.next_scores, chosen.next_tokens, chosen.next_parent

        fin = final.nonzero()  # (F, 2): group, rank; row-major = per sentence, best first
        if fin.numel():
            g, r = fin[:, 0], fin[:, 1]
            p = parent[g, r]
            fin_attn = _map_rows(lambda h: h[g, p].cpu(), attn_hist) if return_attention else None  # (F, t, S…)
            # (F, S…): the EOS step's rows
            fin_last = _map_rows(lambda a: a.view(n, K, *a.shape[1:])[g, p].cpu(), attn) if return_attention else None
            normaliser = length_normaliser(step + 1, options.length_penalty, options.length_penalty_form)  # len counts EOS
            rows = zip(g.tolist(), hist[g, p].tolist(), top_scores[g, r].tolist())
            for i, (gi, toks, lp) in enumerate(rows):
                hyps = finished[live[gi]]
                if len(hyps) < K:
                    att = _map_rows(lambda h: h[i], fin_attn) if fin_attn is not None else None
                    last = _map_rows(lambda h: h[i], fin_last) if fin_last is not None else None
                    hyps.append(Hypothesis(toks, lp / normaliser, lp, att, last))

        alive = [score > NEG_INF for score in next_scores[:, 0].tolist()]  # best first: column 0 decides
        kept = [
            gi
            for gi, (s, a) in enumerate(zip(live, alive))
            if a and len(finished[s]) < K and step < max_len_host[s]
        ]
        if not kept:
            break
        if len(kept) == n:  # no group leaves (most steps): kept is 0..n-1, nothing to index by it
            kg, src, scores, tokens = None, next_parent, next_scores, next_tokens
            first_rows = first_rows_of.get(n)
            if first_rows is None:
                first_rows = first_rows_of[n] = torch.arange(0, n * K, K, dtype=torch.long, device=device).unsqueeze(1)  # (n, 1)
        else:
            kg = torch.tensor(kept, dtype=torch.long, device=device)
            src, scores, tokens = next_parent[kg], next_scores[kg], next_tokens[kg]  # (n', K) each
            first_rows = kg.unsqueeze(1) * K  # (n', 1)
        decoder.reorder((first_rows + src).view(-1))  # (n'*K,) rows of the current step
        hist = torch.cat([_follow(hist, kg, src), tokens.unsqueeze(2)], dim=2)  # (n', K, t+1)
        if return_attention:
            attn_hist = _zip_rows(
                lambda h, a: torch.cat([_follow(h, kg, src), _follow(a.view(n, K, 1, *a.shape[1:]), kg, src)], dim=2),
                attn_hist, attn,
            )  # (n', K, t+1, S…)
        tokens = tokens.view(-1)
        live = [live[gi] for gi in kept]
        step += 1

    # sorted() is stable: equal scores keep finishing order.
    return [sorted(hyps, key=lambda h: -h.score)[:options.n_best] for hyps in finished]
