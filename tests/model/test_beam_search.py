"""Beam search on scripted probability tables: exact hypotheses and hand-computed scores."""

from __future__ import annotations

import math
import random

import pytest
import torch

from model.decoding.beam_search import beam_search
from model.decoding.options import DecodingOptions
from tests.helpers import assert_close_for

PAD, BOS, EOS, A, B = 0, 1, 2, 3, 4
V = 5
log = math.log


def table(probs: dict, default: tuple[float, float, float]):
    """prefix tuple -> (p_eos, p_a, p_b) over the 5-id vocab; pad and bos have probability 0."""

    def next_log_probs(prefix: tuple[int, ...]) -> list[float]:
        p_eos, p_a, p_b = probs.get(prefix, default)
        return [-math.inf, -math.inf] + [log(p) if p > 0 else -math.inf for p in (p_eos, p_a, p_b)]

    return next_log_probs


# T1: beam search disagrees with greedy ("a a a"), and length normalisation changes the winner.
T1 = table(
    {
        (): (0.1, 0.5, 0.4),
        (A,): (0.2, 0.5, 0.3),
        (B,): (0.6, 0.3, 0.1),
        (A, A): (0.3, 0.5, 0.2),
        (A, B): (0.9, 0.05, 0.05),
        (B, A): (0.5, 0.3, 0.2),
    },
    default=(0.4, 0.3, 0.3),
)
# T2: EOS is the best first token.
T2 = table({(): (0.6, 0.3, 0.1), (A,): (0.7, 0.2, 0.1), (B,): (0.8, 0.1, 0.1)}, default=(0.4, 0.3, 0.3))


def _markov(prefix):
    """T4: depends on the last token only; EOS is always 0.1, so only the max length stops it."""
    last = prefix[-1] if prefix else A
    return table({}, default=(0.1, 0.6, 0.3) if last == A else (0.1, 0.2, 0.7))(prefix)


T4 = _markov
# T5: both surviving beams of step 1 come from beam 1 ("b"), so reorder gets [1, 1].
T5 = table(
    {
        (): (0.1, 0.5, 0.4),
        (A,): (0.7, 0.2, 0.1),
        (B,): (0.02, 0.58, 0.4),
        (B, A): (0.5, 0.3, 0.2),
        (B, B): (0.25, 0.5, 0.25),
    },
    default=(0.4, 0.3, 0.3),
)


class ScriptedDecoder:
    """IncrementalDecoder whose log-probs are a function of each row's prefix (tokens after BOS).

    Rows carry (sentence, prefix) and move with `reorder`, as real decoder state does. The
    attention row of a step encodes the row's prefix: row[j] = prefix[j] for j < len(prefix),
    row[len(prefix)] = 1 (a marker on the current position), zeros after; so a hypothesis's
    attention matrix proves which parents it was built from.
    """

    def __init__(self, tables, beam_size, attn_size=None, dtype=torch.float32):
        self.tables = tables
        self.rows = [(b, ()) for b in range(len(tables)) for _ in range(beam_size)]  # row b*K+k
        self.attn_size = attn_size
        self.dtype = dtype
        self.started = False
        self.row_counts: list[int] = []
        self.reorders: list[list[int]] = []

    def step(self, tokens):
        assert tokens.dtype == torch.long and tokens.shape == (len(self.rows),)
        toks = tokens.tolist()
        if self.started:
            self.rows = [(b, prefix + (t,)) for (b, prefix), t in zip(self.rows, toks)]
        else:
            assert toks == [BOS] * len(self.rows)
            self.started = True
        self.row_counts.append(len(self.rows))
        log_probs = torch.tensor([self.tables[b](prefix) for b, prefix in self.rows], dtype=self.dtype)
        if self.attn_size is None:
            return log_probs, None
        attn = torch.zeros(len(self.rows), self.attn_size, dtype=self.dtype)
        for i, (_, prefix) in enumerate(self.rows):
            attn[i, : len(prefix)] = torch.tensor(prefix, dtype=self.dtype)
            attn[i, len(prefix)] = 1.0
        return log_probs, attn

    def reorder(self, index):
        assert index.dtype == torch.long and index.dim() == 1
        self.reorders.append(index.tolist())
        self.rows = [self.rows[i] for i in index.tolist()]


def search(decoder, *, beam_size, n_best=1, length_penalty=1.0, length_penalty_form="power", **batch):
    """beam_search with its options given field by field; these defaults (not the service's) are
    the ones the tables below were computed with."""
    options = DecodingOptions(beam_size=beam_size, n_best=n_best, length_penalty=length_penalty,
                              length_penalty_form=length_penalty_form)
    return beam_search(decoder, options, **batch)


def run(tables, max_lengths, beam_size, attn_size=None, dtype=torch.float32, **kwargs):
    decoder = ScriptedDecoder(tables, beam_size, attn_size, dtype)
    out = search(
        decoder,
        batch_size=len(tables),
        beam_size=beam_size,
        bos_id=BOS,
        eos_id=EOS,
        max_lengths=torch.tensor(max_lengths, dtype=torch.long),
        **kwargs,
    )
    return out, decoder


def expected_attention(tokens, size):
    """The rows ScriptedDecoder gives along the path of `tokens`: step t was fed prefix tokens[:t]."""
    rows = [[float(x) for x in tokens[:t]] + [1.0] + [0.0] * (size - t - 1) for t in range(len(tokens))]
    return torch.tensor(rows, dtype=torch.float32).reshape(len(tokens), size)


# The search adds a hypothesis's log-probs in the decoder's dtype, one rounding per step (at most
# 13: max lengths here are <= 12, plus EOS), and divides once by the length penalty; the tests write
# the same sums in float64.
SEARCH_STEPS_OPS = 16


def check(hyps, expected, dtype=torch.float32):
    """expected: list of (tokens, log_prob, score)."""
    assert [h.tokens for h in hyps] == [e[0] for e in expected]
    assert_close_for([h.log_prob for h in hyps], [e[1] for e in expected], ops=SEARCH_STEPS_OPS, dtype=dtype)
    assert_close_for([h.score for h in hyps], [e[2] for e in expected], ops=SEARCH_STEPS_OPS, dtype=dtype)


def test_beam2_without_length_penalty():
    # step 0 (beam 0 only): a .5, b .4, eos .1 -> first K=2 are a, b: both continue.
    # step 1: aa .5*.5=.25, b·eos .4*.6=.24, ab .5*.3=.15, ba .4*.3=.12 (a·eos .1, bb .04)
    #   -> first 2: aa, b·eos -> "b" finishes with log(.4)+log(.6); continue aa, ab.
    # step 2: ab·eos .15*.9=.135, aaa .25*.5=.125, aa·eos .075, aab .05
    #   -> first 2: ab·eos -> "a b" finishes with log(.5)+log(.3)+log(.9): 2 finished, done.
    (hyps,), decoder = run([T1], [3], beam_size=2, n_best=2, length_penalty=0.0)
    check(hyps, [([B], log(0.4) + log(0.6), log(0.24)), ([A, B], log(0.5) + log(0.3) + log(0.9), log(0.135))])
    assert decoder.row_counts == [2, 2, 2]
    assert decoder.reorders == [[0, 0], [0, 0]]  # a, b from beam 0; then aa, ab both from "a"


def test_beam3_without_length_penalty():
    # step 0: a .5, b .4, eos .1 all in the first K=3 -> "" finishes with log(.1); continue a, b
    #   (the third beam is dead, -inf).
    # step 1: aa .25, b·eos .24, ab .15, ba .12, a·eos .1, bb .04 -> "b" finishes (.24); continue aa, ab, ba.
    # step 2: ab·eos .135, aaa .125, aa·eos .075, ba·eos .4*.3*.5=.06, aab .05, baa .036
    #   -> first 3: ab·eos finishes "a b" (.135): 3 finished, done ("a a" .075 is not taken).
    (hyps,), _ = run([T1], [3], beam_size=3, n_best=3, length_penalty=0.0)
    check(
        hyps,
        [
            ([B], log(0.4) + log(0.6), log(0.24)),
            ([A, B], log(0.5) + log(0.3) + log(0.9), log(0.135)),
            ([], log(0.1), log(0.1)),
        ],
    )


def test_length_penalty_changes_the_winner():
    # Same finished set as beam 3 above, scored log_prob / len (len counts EOS):
    #   "a b": log(.135)/3 = -0.6675 > "b": log(.24)/2 = -0.7136 > "": log(.1)/1 = -2.3026
    (hyps,), _ = run([T1], [3], beam_size=3, n_best=3, length_penalty=1.0)
    check(hyps, [([A, B], log(0.135), log(0.135) / 3), ([B], log(0.24), log(0.24) / 2), ([], log(0.1), log(0.1))])
    # Beam 2 finishes "b" and "a b" (test above); length_penalty=1 puts "a b" first.
    (hyps,), _ = run([T1], [3], beam_size=2, n_best=1)  # default length_penalty=1.0
    check(hyps, [([A, B], log(0.135), log(0.135) / 3)])
    # length_penalty=0.5: "a b": log(.135)/sqrt(3) = -1.1561 < "b": log(.24)/sqrt(2) = -1.0091
    (hyps,), _ = run([T1], [3], beam_size=2, n_best=2, length_penalty=0.5)
    check(hyps, [([B], log(0.24), log(0.24) / 2**0.5), ([A, B], log(0.135), log(0.135) / 3**0.5)])


# T6: beam 2 finishes "b" (P = .4 * .6 = .24, 2 tokens with EOS) at step 1 and "a b" (P = .5 * .5 * .8 = .2,
# 3 tokens) at step 2; "a a" (.08) ends at the same step but the sentence already holds K = 2.
T6 = table({(): (0.1, 0.5, 0.4), (A,): (0.1, 0.4, 0.5), (B,): (0.6, 0.3, 0.1), (A, B): (0.8, 0.1, 0.1)},
           default=(0.4, 0.3, 0.3))


def test_the_gnmt_length_penalty_changes_the_winner():
    # Same α = 0.6, the two forms of model/decoding/length_penalty.py, worked by hand:
    #   power: lp(2) = 2^0.6 = 1.515717, lp(3) = 3^0.6 = 1.933182
    #     "a b": ln(.2)/1.933182 = -1.609438/1.933182 = -0.832533  beats  "b": -1.427116/1.515717 = -0.941546
    #   gnmt (Wu et al. 2016 eq. 14): lp(2) = (7/6)^0.6 = 1.096903, lp(3) = (8/6)^0.6 = 1.188402
    #     "b": -1.427116/1.096903 = -1.301042  beats  "a b": -1.609438/1.188402 = -1.354288
    (hyps,), _ = run([T6], [3], beam_size=2, n_best=2, length_penalty=0.6)
    check(hyps, [([A, B], log(0.2), log(0.2) / 3 ** 0.6), ([B], log(0.24), log(0.24) / 2 ** 0.6)])
    (hyps,), _ = run([T6], [3], beam_size=2, n_best=2, length_penalty=0.6, length_penalty_form="gnmt")
    check(hyps, [([B], log(0.24), log(0.24) / (7 / 6) ** 0.6), ([A, B], log(0.2), log(0.2) / (8 / 6) ** 0.6)])
    # α = 0 is the raw log-prob under either form.
    (hyps,), _ = run([T6], [3], beam_size=2, n_best=2, length_penalty=0.0, length_penalty_form="gnmt")
    check(hyps, [([B], log(0.24), log(0.24)), ([A, B], log(0.2), log(0.2))])


def test_an_unknown_length_penalty_form_is_refused():
    with pytest.raises(ValueError, match=r"^invalid DecodingOptions: length_penalty_form must be one of power, gnmt, got 'average'$"):
        run([T6], [3], beam_size=2, length_penalty_form="average")


def test_eos_as_best_first_token_gives_empty_hypothesis():
    # greedy: eos .6 is the argmax of the first step -> tokens [], log(.6), len 1.
    (hyps,), _ = run([T2], [5], beam_size=1, attn_size=4, return_attention=True)
    check(hyps, [([], log(0.6), log(0.6))])
    assert hyps[0].attention.shape == (0, 4)
    # beam 2: step 0 first K: eos .6, a .3 -> "" finishes; continue a, b.
    # step 1: a·eos .3*.7=.21, b·eos .1*.8=.08, aa .06, ab .03 -> both EOS are in the first 2;
    #   "a" finishes (.21) and makes 2 finished: done, "b" is not taken.
    (hyps,), _ = run([T2], [5], beam_size=2, n_best=2)
    check(hyps, [([], log(0.6), log(0.6)), ([A], log(0.3) + log(0.7), log(0.21) / 2)])


def test_batch_drops_rows_of_finished_sentences():
    # sentence 0: T1, max 3 -> finishes at step 2 (see test_beam2_without_length_penalty).
    # sentence 1: T2, max 5 -> finishes at step 1 (see test_eos_as_best_first_token...).
    # sentence 2: T1, max 0 -> step 0 may only end: "" with log(.1); beam 1 is dead, so 1 hypothesis.
    # sentence 3: T4, max 4. step 0: a .6, b .3; step 1: aa .36, bb .3*.7=.21 (ab .18);
    #   step 2: aaa .216, bbb .147; step 3: aaaa .1296, bbbb .1029; step 4 forced EOS:
    #   "a a a a" .6^4*.1 = .01296, "b b b b" .3*.7^3*.1 = .01029.
    tables = [T1, T2, T1, T4]
    out, decoder = run(tables, [3, 5, 0, 4], beam_size=2, n_best=2, length_penalty=0.0, attn_size=5, return_attention=True)
    expected = [
        [([B], log(0.24), log(0.24)), ([A, B], log(0.135), log(0.135))],
        [([], log(0.6), log(0.6)), ([A], log(0.21), log(0.21))],
        [([], log(0.1), log(0.1))],
        [([A] * 4, 4 * log(0.6) + log(0.1), log(0.01296)), ([B] * 4, log(0.3) + 3 * log(0.7) + log(0.1), log(0.01029))],
    ]
    for hyps, exp in zip(out, expected):
        check(hyps, exp)
        for h in hyps:
            assert torch.equal(h.attention, expected_attention(h.tokens, 5))
    # 4 sentences x 2 beams; sentence 2 leaves after step 0, 1 after step 1, 0 after step 2.
    assert decoder.row_counts == [8, 6, 4, 2, 2]
    # after step 0: groups 0, 1, 3 keep beam 0 twice (rows 0, 2, 6); after step 1: sentence 0 keeps
    # "a" twice (row 0), sentence 3 keeps a|b (rows 4, 5); then sentence 3 alone (rows 2, 3, then 0, 1).
    assert decoder.reorders == [[0, 0, 2, 2, 6, 6], [0, 0, 4, 5], [2, 3], [0, 1]]
    # Batching changes nothing: each sentence alone gives the same hypotheses.
    for b, (tab, max_len) in enumerate(zip(tables, [3, 5, 0, 4])):
        (alone,), _ = run([tab], [max_len], beam_size=2, n_best=2, length_penalty=0.0, attn_size=5, return_attention=True)
        assert [(h.tokens, h.log_prob, h.score) for h in alone] == [(h.tokens, h.log_prob, h.score) for h in out[b]]
        assert all(torch.equal(x.attention, y.attention) for x, y in zip(alone, out[b]))


def _random_table(seed, vocab):
    def next_log_probs(prefix):
        gen = torch.Generator().manual_seed(hash((seed,) + prefix) & 0xFFFFFFFF)
        return torch.log_softmax(3 * torch.randn(vocab, generator=gen, dtype=torch.float64), 0).tolist()

    return next_log_probs


def _argmax_decode(next_log_probs, max_len):
    prefix, total = (), 0.0
    while True:
        lp = next_log_probs(prefix)
        tok = EOS if len(prefix) == max_len else max(range(len(lp)), key=lp.__getitem__)
        total += lp[tok]
        if tok == EOS:
            return list(prefix), total
        prefix += (tok,)


def test_greedy_is_beam_1_is_argmax():
    # T1 by hand: a .5, a .5, a .5 (beam 2 found "b"), then max length 3 forces eos .4 (default row).
    (hyps,), _ = run([T1], [3], beam_size=1)
    check(hyps, [([A, A, A], 3 * log(0.5) + log(0.4), (3 * log(0.5) + log(0.4)) / 4)])
    tables = [_random_table(seed, 8) for seed in range(6)]
    max_lengths = [0, 1, 3, 6, 10, 12]
    out, _ = run(tables, max_lengths, beam_size=1, length_penalty=0.0)
    for tab, max_len, (hyp,) in zip(tables, max_lengths, out):
        tokens, total = _argmax_decode(tab, max_len)
        assert hyp.tokens == tokens
        assert_close_for(hyp.log_prob, total, ops=SEARCH_STEPS_OPS)
        assert hyp.score == hyp.log_prob
    assert {len(hyps[0].tokens) for hyps in out} != {0}  # the random tables do produce tokens


def _reference_search(next_log_probs, beam_size, max_len, length_penalty):
    """The same rules, one sentence, plain Python: 2K candidates, EOS finishes only within the first K."""
    beams, finished, step = [((), 0.0)], [], 0
    while True:
        cands = []
        for prefix, score in beams:
            lp = next_log_probs(prefix)
            cands += [(score + lp[t], prefix, t) for t in range(len(lp)) if step < max_len or t == EOS]
        cands = sorted(cands, key=lambda c: -c[0])[: 2 * beam_size]
        for total, prefix, tok in cands[:beam_size]:
            if tok == EOS and len(finished) < beam_size:
                finished.append((list(prefix), total / (step + 1) ** length_penalty))
        beams = [(prefix + (tok,), total) for total, prefix, tok in cands if tok != EOS][:beam_size]
        if len(finished) >= beam_size or step >= max_len or not beams:
            return sorted(finished, key=lambda f: -f[1])
        step += 1


@pytest.mark.parametrize("beam_size", [1, 2, 3, 5])
def test_matches_unbatched_reference(beam_size):
    tables = [_random_table(100 + seed, 6) for seed in range(7)]
    max_lengths = [0, 1, 2, 4, 7, 9, 12]
    out, decoder = run(tables, max_lengths, beam_size=beam_size, n_best=beam_size, length_penalty=1.0)
    for tab, max_len, hyps in zip(tables, max_lengths, out):
        ref = _reference_search(tab, beam_size, max_len, 1.0)
        assert [h.tokens for h in hyps] == [r[0] for r in ref]
        assert_close_for([h.score for h in hyps], [r[1] for r in ref], ops=SEARCH_STEPS_OPS)
    assert decoder.row_counts[-1] < decoder.row_counts[0]  # rows were dropped along the way


def test_max_length_forces_eos():
    # T4 prefers "a" (.6) over eos (.1) forever; max 2 lets two tokens through, then only EOS:
    # log(.6)+log(.6)+log(.1), len 3.
    (hyps,), _ = run([T4], [2], beam_size=1)
    check(hyps, [([A, A], 2 * log(0.6) + log(0.1), (2 * log(0.6) + log(0.1)) / 3)])
    # beam 2, max 1: step 0 a .5, b .4; step 1 forced: b·eos .4*.6=.24, a·eos .5*.2=.1.
    (hyps,), _ = run([T1], [1], beam_size=2, n_best=2, length_penalty=0.0)
    check(hyps, [([B], log(0.24), log(0.24)), ([A], log(0.1), log(0.1))])
    # max 0: the first step may only end: log(.1) although eos is T1's worst first token.
    (hyps,), _ = run([T1], [0], beam_size=3, n_best=1)
    check(hyps, [([], log(0.1), log(0.1))])


def test_attention_follows_beam_parents():
    # T5, beam 2, max 2. step 0: a .5, b .4 continue.
    # step 1: a·eos .5*.7=.35, ba .4*.58=.232, bb .4*.4=.16, aa .1 -> "a" finishes (.35);
    #   both survivors ba, bb come from beam 1 -> reorder [1, 1].
    # step 2 (forced): ba·eos .232*.5=.116 -> "b a" finishes; 2 finished, done.
    (hyps,), decoder = run([T5], [2], beam_size=2, n_best=2, length_penalty=0.0, attn_size=3, return_attention=True)
    check(hyps, [([A], log(0.35), log(0.35)), ([B, A], log(0.116), log(0.116))])
    assert decoder.reorders == [[0, 0], [1, 1]]
    # Rows: step 0 fed BOS (prefix (), marker at 0); "b a"'s step 1 was fed prefix (b,) = (4,).
    assert torch.equal(hyps[0].attention, torch.tensor([[1.0, 0.0, 0.0]]))
    assert torch.equal(hyps[1].attention, torch.tensor([[1.0, 0.0, 0.0], [4.0, 1.0, 0.0]]))
    # Without return_attention nothing is kept, even from a decoder that gives attention.
    (hyps,), _ = run([T5], [2], beam_size=2, n_best=2, attn_size=3)
    assert [h.attention for h in hyps] == [None, None]


def test_equal_scores_keep_finishing_order():
    # Log-probs in whole multiples of L = log 2 make sums exact: -L + -L == -2L bit for bit.
    L = log(2.0)
    rows = {(): [-2 * L, -L, -3 * L], (A,): [-L, -2 * L, -3 * L], (B,): [-L, -3 * L, -3 * L]}

    def tab(prefix):
        return [-math.inf, -math.inf] + rows.get(prefix, [-L, -L, -L])

    # step 0: a -L, eos -2L (first K=2) -> "" finishes with -2L; continue a, b.
    # step 1: a·eos -L-L = -2L first -> "a" finishes with -2L: same score, finished later.
    (hyps,), _ = run([tab], [5], beam_size=2, n_best=2, length_penalty=0.0, dtype=torch.float64)
    assert [h.tokens for h in hyps] == [[], [A]]
    assert [h.score for h in hyps] == [-2 * L, -2 * L]


def test_float64_decoder():
    # Scores accumulate in the decoder's dtype when it is wider than float32.
    (hyps,), _ = run([T1], [3], beam_size=2, n_best=2, length_penalty=0.0, dtype=torch.float64)
    check(hyps, [([B], log(0.4) + log(0.6), log(0.24)), ([A, B], log(0.135), log(0.135))], dtype=torch.float64)


def test_empty_batch():
    out, decoder = run([], [], beam_size=2)
    assert out == [] and decoder.row_counts == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"beam_size": 0}, "beam_size must be an integer >= 1, got 0"),
        ({"beam_size": True}, "beam_size must be an integer >= 1, got True"),
        ({"beam_size": 2.0}, "beam_size must be an integer >= 1, got 2.0"),
        ({"beam_size": 2, "n_best": 1.0}, "n_best must be an integer, got 1.0"),
        ({"beam_size": 2, "n_best": 0}, "n_best must be in 1..beam_size (2), got 0"),
        ({"beam_size": 2, "n_best": 3}, "n_best must be in 1..beam_size (2), got 3"),
    ],
)
def test_the_search_options_are_checked_by_their_type(fields, message):
    # The search reads a DecodingOptions, so what it cannot run is refused when the options are made.
    with pytest.raises(ValueError) as info:
        DecodingOptions(**fields)
    assert str(info.value) == "invalid DecodingOptions: " + message


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": -1}, "batch_size must be an integer >= 0, got -1"),
        ({"max_lengths": torch.tensor([3])}, "max_lengths must be a tensor of shape (batch_size,) = (2,), got (1,)"),
        ({"max_lengths": torch.tensor([3.0, 2.0])}, "max_lengths must be an integer tensor, got torch.float32"),
        ({"max_lengths": torch.tensor([3, -1])}, "max_lengths must be >= 0, got -1"),
    ],
)
def test_invalid_arguments(kwargs, message):
    args = {"batch_size": 2, "beam_size": 2, "bos_id": BOS, "eos_id": EOS, "max_lengths": torch.tensor([3, 3])}
    args.update(kwargs)
    with pytest.raises(ValueError) as info:
        search(ScriptedDecoder([T1, T1], 2), **args)
    assert str(info.value) == message


def test_return_attention_needs_decoder_attention():
    with pytest.raises(ValueError) as info:
        run([T1], [3], beam_size=2, return_attention=True)  # attn_size=None: the decoder gives no attention
    assert str(info.value) == "return_attention=True needs decoder.step to return attention (2, S), got None"


class NamedRowsDecoder(ScriptedDecoder):
    """ScriptedDecoder whose attention comes as two named per-row tensors of different shapes:
    "tokens" its rows (N, S) and "twice" the same rows doubled, laid out (N, 2, S)."""

    def step(self, tokens):
        log_probs, attn = super().step(tokens)
        return log_probs, {"tokens": attn, "twice": torch.stack([attn, 2 * attn], dim=1)}


def test_named_rows_follow_the_beam_parents_like_one_tensor():
    tables = [T1, T2, T1, T4]
    common = dict(batch_size=4, beam_size=2, bos_id=BOS, eos_id=EOS, max_lengths=torch.tensor([3, 5, 0, 4]),
                  n_best=2, length_penalty=0.0, return_attention=True)
    plain = search(ScriptedDecoder(tables, 2, 5), **common)
    named = search(NamedRowsDecoder(tables, 2, 5), **common)
    assert [[h.tokens for h in hyps] for hyps in named] == [[h.tokens for h in hyps] for hyps in plain]
    for hyps in named:
        for h in hyps:
            rows = expected_attention(h.tokens, 5)  # (T, S)
            assert torch.equal(h.attention["tokens"], rows)
            assert torch.equal(h.attention["twice"], torch.stack([rows, 2 * rows], dim=1))  # (T, 2, S)


def test_return_attention_needs_every_named_row():
    class Missing(ScriptedDecoder):
        def step(self, tokens):
            log_probs, attn = super().step(tokens)
            return log_probs, {"tokens": attn, "phrases": None}

    with pytest.raises(ValueError, match=r"return_attention=True needs decoder.step to return attention \(2, S\), got "
                                         r"\{'tokens': \(2, 5\), 'phrases': None\}"):
        search(Missing([T1], 2, 5), batch_size=1, beam_size=2, bos_id=BOS, eos_id=EOS,
                    max_lengths=torch.tensor([3]), return_attention=True)


def test_a_named_row_without_a_source_axis_is_refused():
    class FlatNamed(ScriptedDecoder):
        def step(self, tokens):
            log_probs, attn = super().step(tokens)
            return log_probs, {"tokens": attn, "per_row": attn[:, 0]}  # (2,): one number a row, no S

    with pytest.raises(ValueError, match=r"return_attention=True needs decoder.step to return attention \(2, S\), got "
                                         r"\{'tokens': \(2, 5\), 'per_row': \(2,\)\}"):
        search(FlatNamed([T1], 2, 5), batch_size=1, beam_size=2, bos_id=BOS, eos_id=EOS,
                    max_lengths=torch.tensor([3]), return_attention=True)


def test_log_probs_with_the_wrong_number_of_rows_are_refused():
    class ShortDecoder(ScriptedDecoder):
        def step(self, tokens):
            log_probs, attn = super().step(tokens)
            return log_probs[:-1], attn

    with pytest.raises(ValueError) as info:
        search(ShortDecoder([T1], 2), batch_size=1, beam_size=2, bos_id=BOS, eos_id=EOS, max_lengths=torch.tensor([3]))
    assert str(info.value) == "decoder.step returned log_probs of shape (1, 5), expected (2, V)"


def test_attention_with_the_wrong_shape_is_refused():
    class FlatAttention(ScriptedDecoder):
        def step(self, tokens):
            log_probs, attn = super().step(tokens)
            return log_probs, attn[None]  # (1, N, S): one dimension too many

    with pytest.raises(ValueError) as info:
        search(FlatAttention([T1], 2, attn_size=4), batch_size=1, beam_size=2, bos_id=BOS, eos_id=EOS,
                    max_lengths=torch.tensor([3]), return_attention=True)
    assert str(info.value) == "return_attention=True needs decoder.step to return attention (2, S), got (1, 2, 4)"


def test_a_vocabulary_of_eos_alone_ends_every_sentence_at_once():
    # V = 1: each step has K·V = K candidates, fewer than the 2K a larger vocabulary gives.
    class OnlyEos:
        def __init__(self):
            self.steps = 0

        def step(self, tokens):
            self.steps += 1
            return torch.zeros(len(tokens), 1), None

        def reorder(self, index):
            raise AssertionError("no beam survives the first step")

    decoder = OnlyEos()
    (hyps,) = search(decoder, batch_size=1, beam_size=3, bos_id=0, eos_id=0, max_lengths=torch.tensor([4]), n_best=3)
    assert [(h.tokens, h.score, h.log_prob) for h in hyps] == [([], 0.0, 0.0)]
    assert decoder.steps == 1


def test_a_sentence_with_no_live_beam_left_is_not_decoded_further():
    # After BOS only EOS has probability: one hypothesis finishes, every continuation is -inf,
    # so the sentence stops at once although it has fewer than K hypotheses and room to grow.
    only_eos = table({}, default=(1.0, 0.0, 0.0))
    (hyps, other), decoder = run([only_eos, T4], [5, 2], beam_size=2, n_best=2)
    assert [(h.tokens, h.score) for h in hyps] == [([], 0.0)]
    assert len(other) == 2
    assert decoder.row_counts == [4, 2, 2]  # sentence 0's rows leave after the first step


@pytest.mark.parametrize("beam_size", [1, 5])
def test_matches_unbatched_reference_with_a_blocked_vocabulary(beam_size):
    # 2048 tokens: the search ranks candidates block by block (model/decoding/top_candidates.py).
    tables = [_random_table(300 + seed, 2048) for seed in range(3)]
    max_lengths = [1, 4, 6]
    out, _ = run(tables, max_lengths, beam_size=beam_size, n_best=beam_size, length_penalty=1.0)
    for tab, max_len, hyps in zip(tables, max_lengths, out):
        ref = _reference_search(tab, beam_size, max_len, 1.0)
        assert [h.tokens for h in hyps] == [r[0] for r in ref]
        assert_close_for([h.score for h in hyps], [r[1] for r in ref], ops=SEARCH_STEPS_OPS)
