"""One beam step's choice (model/decoding/selection.py): a hand-computed step, a brute-force
reference on random steps, and the C kernel's candidates (model/cpu_kernels) chosen from the
same way as the log-softmax's."""
import math

import pytest
import torch

from model.decoding.selection import Selection, candidate_count, candidates, select, select_step

NEG = float("-inf")
EOS = 1


def test_a_hand_computed_step():
    # K = 2 beams over V = 4 tokens; cumulative: beam 0 [-4, -1.5, -2, -3], beam 1 [-2.25, -6, -3.5, -2.75].
    scores = torch.tensor([[-1.0, -2.0]])
    log_probs = torch.tensor([[-3.0, -0.5, -1.0, -2.0], [-0.25, -4.0, -1.5, -0.75]])
    chosen = select_step(scores, log_probs, EOS)
    assert chosen.scores.tolist() == [[-1.5, -2.0, -2.25, -2.75]]
    assert chosen.parent.tolist() == [[0, 0, 1, 1]] and chosen.token.tolist() == [[1, 2, 0, 3]]
    assert chosen.finished.tolist() == [[True, False]]  # EOS of beam 0 ranks first: a hypothesis
    assert chosen.next_scores.tolist() == [[-2.0, -2.25]]
    assert chosen.next_tokens.tolist() == [[2, 0]] and chosen.next_parent.tolist() == [[0, 1]]


def test_at_the_limit_only_eos_and_the_rest_is_dead():
    scores = torch.tensor([[-1.0, -2.0]])
    log_probs = torch.tensor([[-3.0, -0.5, -1.0, -2.0], [-0.25, -4.0, -1.5, -0.75]])
    chosen = select_step(scores, log_probs, EOS, at_limit=torch.tensor([True]))
    assert chosen.scores[0, :2].tolist() == [-1.5, -6.0] and chosen.scores[0, 2:].tolist() == [NEG, NEG]
    assert chosen.token[0, :2].tolist() == [EOS, EOS] and chosen.parent[0, :2].tolist() == [0, 1]
    assert chosen.finished.tolist() == [[True, True]]
    assert chosen.next_scores.tolist() == [[NEG, NEG]]
    # The log-probs handed in are left as they were (a backend may own them).
    assert log_probs[0, 0].item() == -3.0


def test_an_eos_only_vocabulary_keeps_eos_as_a_dead_beam():
    chosen = select_step(torch.tensor([[0.0, NEG]]), torch.tensor([[-0.5], [-0.5]]), eos_id=0)
    assert candidate_count(2, 1) == 2
    assert chosen.finished.tolist() == [[True, False]]  # beam 1 was never live (-inf)
    assert chosen.next_scores.tolist() == [[NEG, NEG]] and chosen.next_tokens.tolist() == [[0, 0]]


def brute_force(scores: torch.Tensor, log_probs: torch.Tensor, at_limit: list[bool]):
    """The rules written out per sentence in Python: every (beam, token) pair ranked."""
    n, K = scores.shape
    V = log_probs.shape[1]
    out = []
    for b in range(n):
        pairs = []
        for k in range(K):
            for v in range(V):
                value = scores[b, k].item() + log_probs[b * K + k, v].item()
                if at_limit[b] and v != EOS:
                    value = NEG
                pairs.append((value, k, v))
        ranked = sorted(pairs, key=lambda p: -p[0])[: 2 * K]
        finished = [v == EOS and value > NEG for value, _, v in ranked[:K]]
        beams = [(value, k, v) for value, k, v in ranked if v != EOS][:K]
        out.append((ranked, finished, beams))
    return out


@pytest.mark.parametrize("seed", range(4))
def test_random_steps_equal_the_rules_written_out(seed):
    torch.manual_seed(seed)
    n, K, V = 3, 3, 7
    scores = -torch.rand(n, K) * 3
    scores[0, 1:] = NEG  # a first step: beam 0 alone
    log_probs = torch.log_softmax(torch.randn(n * K, V) * 2, dim=-1)
    at_limit = [False, True, False]
    chosen = select_step(scores, log_probs, EOS, torch.tensor(at_limit))
    for b, (ranked, finished, beams) in enumerate(brute_force(scores, log_probs, at_limit)):
        live = [r for r in ranked if r[0] > NEG]  # -inf candidates tie: their order is arbitrary
        assert chosen.scores[b, : len(live)].tolist() == pytest.approx([r[0] for r in live], abs=1e-6)
        assert list(zip(chosen.parent[b].tolist(), chosen.token[b].tolist()))[: len(live)] == [(k, v) for _, k, v in live]
        assert chosen.finished[b].tolist() == finished
        live_beams = [r for r in beams if r[0] > NEG]
        assert chosen.next_scores[b, : len(live_beams)].tolist() == pytest.approx([r[0] for r in live_beams], abs=1e-6)
        assert chosen.next_tokens[b, : len(live_beams)].tolist() == [v for _, _, v in live_beams]
        assert chosen.next_parent[b, : len(live_beams)].tolist() == [k for _, k, _ in live_beams]
        assert all(s == NEG for s in chosen.next_scores[b, len(live_beams):].tolist())


def test_the_c_kernels_candidates_make_the_same_choice():
    from model.cpu_kernels import ops

    torch.manual_seed(5)
    n, K, V, eos = 4, 3, 1000, 2
    never = [0, 1]
    logits = torch.randn(n * K, V) * 4
    scores = -torch.rand(n, K) * 5
    scores[1, 1:] = NEG  # a first step
    at_limit = torch.tensor([False, False, True, False])
    banned = torch.zeros(V, dtype=torch.uint8)
    banned[never] = 1
    values, index = ops.beam_candidates(logits, scores, banned, at_limit.to(torch.uint8), eos, candidate_count(K, V))
    kernel = select(values, index, V, eos, K)

    log_probs = torch.log_softmax(logits, dim=-1)
    log_probs[:, never] = NEG  # what the eager search's decoder does before selecting
    want = select_step(scores, log_probs, eos, at_limit)
    # The C kernel's exp is a polynomial: values agree to float32 rounding of sums of a few nats.
    torch.testing.assert_close(kernel.scores, want.scores, atol=1e-5, rtol=0)
    torch.testing.assert_close(kernel.next_scores, want.next_scores, atol=1e-5, rtol=0)
    live = want.scores > NEG
    assert torch.equal(kernel.parent[live], want.parent[live]) and torch.equal(kernel.token[live], want.token[live])
    assert torch.equal(kernel.finished, want.finished)
    beams = want.next_scores > NEG
    assert torch.equal(kernel.next_tokens[beams], want.next_tokens[beams])
    assert torch.equal(kernel.next_parent[beams], want.next_parent[beams])
    assert want.finished[2].tolist() == [True] * 3  # the sentence at its limit ends on every beam's EOS
    assert not beams[2].any()
    assert math.isfinite(want.next_scores[0, 0].item())


def test_candidates_take_the_search_dtype():
    scores = torch.zeros(1, 1, dtype=torch.float64)
    values, _ = candidates(scores, torch.tensor([[-0.5, -1.0, -2.0]], dtype=torch.float16), EOS)
    assert values.dtype == torch.float64 and values.tolist() == [[-0.5, -1.0]]


FIELDS = ("scores", "parent", "token", "finished", "next_scores", "next_tokens", "next_parent")


def test_the_c_kernels_select_is_select_bit_for_bit():
    """ops.select (the kernel backend's choice, one C call) against `select`, which defines it: random
    steps over tiny vocabularies, where EOS candidates fill in as dead beams, -inf candidates and ties."""
    from model.cpu_kernels import ops

    generator = torch.Generator().manual_seed(11)
    for _ in range(400):
        n, K, V = (int(torch.randint(1, high, (), generator=generator)) for high in (5, 6, 7))
        count = candidate_count(K, V)
        values = torch.randint(-4, 1, (n, count), generator=generator).float()  # ties on purpose
        values[torch.rand(n, count, generator=generator) < 0.2] = NEG
        values = values.sort(dim=1, descending=True).values
        index = torch.randint(0, K * V, (n, count), generator=generator)
        eos = int(torch.randint(0, V, (), generator=generator))
        want, got = select(values, index, V, eos, K), Selection(*ops.select(values, index, V, eos, K))
        for field in FIELDS:
            a, b = getattr(want, field), getattr(got, field)
            assert a.dtype == b.dtype and torch.equal(a, b), (field, a, b)


def test_the_c_kernels_select_by_hand():
    from model.cpu_kernels import ops

    # V = 3, EOS = 1, K = 2; ranks: (beam 1, EOS), (beam 0, 2), (beam 0, EOS), (beam 1, 0).
    values = torch.tensor([[-1.0, -1.5, -2.0, -2.5]])
    index = torch.tensor([[4, 2, 1, 3]])
    chosen = Selection(*ops.select(values, index, 3, 1, 2))
    assert chosen.parent.tolist() == [[1, 0, 0, 1]] and chosen.token.tolist() == [[1, 2, 1, 0]]
    assert chosen.finished.tolist() == [[True, False]]
    assert chosen.next_scores.tolist() == [[-1.5, -2.5]]
    assert chosen.next_tokens.tolist() == [[2, 0]] and chosen.next_parent.tolist() == [[0, 1]]
    # Only EOS candidates left: they fill in, in rank order, dead.
    chosen = Selection(*ops.select(torch.tensor([[-1.0, -2.0]]), torch.tensor([[1, 4]]), 3, 1, 2))
    assert chosen.next_scores.tolist() == [[NEG, NEG]] and chosen.next_parent.tolist() == [[0, 1]]
    with pytest.raises(ValueError, match="cannot select 3 beams from 2 candidates"):
        ops.select(torch.tensor([[-1.0, -2.0]]), torch.tensor([[1, 4]]), 3, 1, 3)
