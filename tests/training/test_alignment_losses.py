"""The global fertility loss and the bilingual trace bonus against hand numbers and explicit loops."""
import math

import torch

from training.losses import global_fertility_loss, global_fertility_term, real_token_mask, sentence_traces, trace_bonus
from tests.helpers import HAND_FORMULA_OPS, TINY_MODEL_OPS, assert_close_for

PAD, BOS, EOS = 0, 1, 2

# Two sentences, T = 3 target rows, S = 3 source positions. Sentence 0 is full; sentence 1 has two
# real target rows and two real source positions: its third row and third column are padding and
# hold junk that must not count.
ALPHA = torch.tensor([
    [[0.7, 0.2, 0.1],
     [0.1, 0.8, 0.1],
     [0.0, 0.1, 0.9]],
    [[0.6, 0.4, 0.0],
     [0.3, 0.7, 0.0],
     [0.2, 0.3, 0.5]],
])  # (2, 3, 3)
TARGET_MASK = torch.tensor([[True, True, True], [True, True, False]])
SOURCE_MASK = torch.tensor([[True, True, True], [True, True, False]])
MEAN = torch.tensor([[1.0, 1.2, 0.9], [0.5, 1.5, 9.0]])
VARIANCE = torch.tensor([[0.5, 0.25, 1.0], [2.0, 0.1, 1e-4]])


def neg_log_normal(x, mu, var):
    return -math.log(math.exp(-(x - mu) ** 2 / (2 * var)) / math.sqrt(2 * math.pi * var))


def test_fertility_loss_matches_the_formula_on_hand_numbers():
    # Fertilities: column sums over the real rows: [0.8, 1.1, 1.1] and [0.9, 1.1].
    terms = [neg_log_normal(0.8, 1.0, 0.5), neg_log_normal(1.1, 1.2, 0.25), neg_log_normal(1.1, 0.9, 1.0),
             neg_log_normal(0.9, 0.5, 2.0), neg_log_normal(1.1, 1.5, 0.1)]
    loss = global_fertility_loss(ALPHA, TARGET_MASK, SOURCE_MASK, MEAN, VARIANCE)
    assert_close_for(loss, sum(terms) / 5, ops=TINY_MODEL_OPS)


def test_the_papers_weight_sums_over_source_words_against_the_summed_token_likelihood():
    """Cohn et al. §3.3: objective = −Σ_t log p(y_t) − Σᵢ log N(fᵢ) (weight 1), both sums over the batch.
    The trainer divides by the N_tgt target tokens: the fertility term is Σᵢ −log N(fᵢ) / N_tgt."""
    terms = [neg_log_normal(0.8, 1.0, 0.5), neg_log_normal(1.1, 1.2, 0.25), neg_log_normal(1.1, 0.9, 1.0),
             neg_log_normal(0.9, 0.5, 2.0), neg_log_normal(1.1, 1.5, 0.1)]
    per_position = global_fertility_loss(ALPHA, TARGET_MASK, SOURCE_MASK, MEAN, VARIANCE)
    n_source, n_target = 5, 8  # 8: the target tokens the cross-entropy of this batch is divided by
    paper = global_fertility_term(per_position, n_source, n_target, "sum")
    assert_close_for(paper, sum(terms) / 8, ops=TINY_MODEL_OPS)
    mean = global_fertility_term(per_position, n_source, n_target, "mean")
    assert_close_for(mean, sum(terms) / 5, ops=TINY_MODEL_OPS)
    # The "mean" form with weight w is the paper's with weight w · N_tgt / N_src: the former recipe's
    # 0.05 per position was 0.05 · 8/5 = 0.08 of the paper's weight on this batch.
    assert_close_for(0.05 * mean, 0.08 * paper, ops=TINY_MODEL_OPS)


def test_padding_contributes_nothing():
    alpha = ALPHA.clone().requires_grad_(True)
    mean = MEAN.clone().requires_grad_(True)
    variance = VARIANCE.clone().requires_grad_(True)
    loss = global_fertility_loss(alpha, TARGET_MASK, SOURCE_MASK, mean, variance)
    loss.backward()
    # No gradient flows to a padded row, a padded column, or the Gaussian of a padded position.
    assert torch.equal(alpha.grad[1, 2], torch.zeros(3)) and torch.equal(alpha.grad[1, :, 2], torch.zeros(3))
    assert mean.grad[1, 2] == 0 and variance.grad[1, 2] == 0
    assert bool((alpha.grad[0] != 0).all()) and bool((mean.grad[0] != 0).all())
    # Junk at the padded positions, even values that would be NaN-prone, changes nothing.
    junk_alpha, junk_mean, junk_variance = ALPHA.clone(), MEAN.clone(), VARIANCE.clone()
    junk_alpha[1, 2] = 7.0
    junk_alpha[1, :, 2] = 3.0
    junk_mean[1, 2], junk_variance[1, 2] = -50.0, 1e-9
    assert torch.equal(global_fertility_loss(junk_alpha, TARGET_MASK, SOURCE_MASK, junk_mean, junk_variance), loss.detach())


def test_a_padded_sentence_equals_the_unpadded_one():
    alone = global_fertility_loss(ALPHA[1:, :2, :2], TARGET_MASK[1:, :2], SOURCE_MASK[1:, :2], MEAN[1:, :2],
                                  VARIANCE[1:, :2])
    padded = global_fertility_loss(ALPHA[1:], TARGET_MASK[1:], SOURCE_MASK[1:], MEAN[1:], VARIANCE[1:])
    assert_close_for(alone, padded, ops=HAND_FORMULA_OPS)


# Trace bonus. Forward batch: src = x + [EOS] (B, S), tgt_out = y + [EOS] (B, T). Sentence 0: |x| = 3,
# |y| = 2; sentence 1: |x| = 1, |y| = 3.
SRC = torch.tensor([[11, 12, 13, EOS], [14, EOS, PAD, PAD]])  # (2, 4)
TGT_OUT = torch.tensor([[21, 22, EOS, PAD], [23, 24, 25, EOS]])  # (2, 4)


def explicit_traces(forward, backward, src, tgt_out):
    out = []
    for b in range(src.shape[0]):
        total = 0.0
        for j in range(tgt_out.shape[1]):
            for i in range(src.shape[1]):
                if int(tgt_out[b, j]) not in (PAD, EOS) and int(src[b, i]) not in (PAD, EOS):
                    total += float(forward[b, j, i]) * float(backward[b, i, j])
        out.append(total)
    return out


def test_trace_bonus_equals_the_explicit_double_loop():
    generator = torch.Generator().manual_seed(0)
    forward = torch.rand(2, 4, 4, generator=generator).softmax(-1)  # (B, T, S)
    backward = torch.rand(2, 4, 4, generator=generator).softmax(-1)  # (B, S, T)
    source_words, target_words = real_token_mask(SRC, PAD, EOS), real_token_mask(TGT_OUT, PAD, EOS)
    assert source_words.tolist() == [[True, True, True, False], [True, False, False, False]]
    expected = explicit_traces(forward, backward, SRC, TGT_OUT)
    traces = sentence_traces(forward, backward, source_words, target_words)
    assert_close_for(traces, torch.tensor(expected), ops=TINY_MODEL_OPS)
    # Normalised by the mean length of the two sides: ((3 + 2) + (1 + 3)) / 2 = 4.5 words.
    bonus = trace_bonus(forward, backward, source_words, target_words)
    assert_close_for(bonus, sum(expected) / 4.5, ops=TINY_MODEL_OPS)


def test_trace_bonus_ignores_padding_and_special_tokens():
    generator = torch.Generator().manual_seed(1)
    forward = torch.rand(2, 4, 4, generator=generator)
    backward = torch.rand(2, 4, 4, generator=generator)
    source_words, target_words = real_token_mask(SRC, PAD, EOS), real_token_mask(TGT_OUT, PAD, EOS)
    before = sentence_traces(forward, backward, source_words, target_words)
    # Change every entry that touches EOS or padding on either side: rows/columns 3 of sentence 0's
    # source, 2-3 of its target; sentence 1's source 1-3 and target 3.
    for tensor, rows, cols in ((forward, TGT_OUT, SRC), (backward, SRC, TGT_OUT)):
        for b in range(2):
            for r in range(4):
                for c in range(4):
                    if int(rows[b, r]) in (PAD, EOS) or int(cols[b, c]) in (PAD, EOS):
                        tensor[b, r, c] = 100.0
    assert torch.equal(sentence_traces(forward, backward, source_words, target_words), before)


def test_trace_bonus_is_one_for_agreeing_one_to_one_alignments():
    # x = (a, b, c), y = (A, B, C) with a-B, b-C, c-A in both directions; EOS rows attend to EOS.
    perm = [1, 2, 0]  # target j is aligned to source perm[j]
    forward = torch.zeros(1, 4, 4)
    backward = torch.zeros(1, 4, 4)
    for j, i in enumerate(perm):
        forward[0, j, i] = 1.0
        backward[0, i, j] = 1.0
    forward[0, 3, 3] = backward[0, 3, 3] = 1.0
    src = torch.tensor([[11, 12, 13, EOS]])
    tgt_out = torch.tensor([[21, 22, 23, EOS]])
    words = (real_token_mask(src, PAD, EOS), real_token_mask(tgt_out, PAD, EOS))
    assert sentence_traces(forward, backward, *words).tolist() == [3.0]
    assert trace_bonus(forward, backward, *words).item() == 1.0
    # Disagreeing directions (the backward model transposed the other way) get nothing.
    backward_wrong = torch.zeros(1, 4, 4)
    for j, i in enumerate(perm):
        backward_wrong[0, j, i] = 1.0
    assert trace_bonus(forward, backward_wrong, *words).item() == 0.0


def test_real_token_mask_drops_every_special_id():
    ids = torch.tensor([[BOS, 5, EOS, PAD]])
    assert real_token_mask(ids, PAD).tolist() == [[True, True, True, False]]
    assert real_token_mask(ids, PAD, EOS, BOS).tolist() == [[False, True, False, False]]
