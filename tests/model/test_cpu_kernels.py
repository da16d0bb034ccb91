"""model/cpu_kernels: each C kernel against the PyTorch computation it replaces.

Attention sums run in another order than PyTorch's, so values agree to float rounding (1e-5 on
these magnitudes), not bit for bit; candidate indices must be equal (random logits have no ties).
"""
from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from model import cpu_kernels
from model.cpu_kernels import ops
from model.decoding.top_candidates import top_candidates
from tests.helpers import assert_close_for

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_python_limits_are_the_c_sources():
    import re

    defines = dict(re.findall(r"^#define (MAX_KEYS|MAX_HEAD_DIM) (\d+)$", cpu_kernels.SOURCE.read_text(), re.M))
    assert defines == {"MAX_KEYS": str(cpu_kernels.MAX_KEYS), "MAX_HEAD_DIM": str(cpu_kernels.MAX_HEAD_DIM)}


def test_the_kernels_build_here():
    # CI has a C compiler: a kernel that cannot be had here would silently leave the fast path off.
    assert cpu_kernels.library() is not None, cpu_kernels.unavailable()


# 1,400 steps of 3 heads: more scores than the kernel's steps-outer loop holds (MAX_KEYS), so the
# per-head loop runs; the others take the steps-outer loop (the same sums, decoding.c).
@pytest.mark.parametrize("head_dim, steps", [(32, 5), (64, 5), (24, 5), (32, 1400)])
def test_self_attention_over_a_paged_cache_equals_softmax_attention(head_dim, steps):
    torch.manual_seed(0)
    heads, rows = 3, 6
    d = heads * head_dim
    # Step s wrote rows_at[s] rows; row n's key at step s is row table[n, s] of that column.
    rows_at = [9, 8, 8, 7, 6] if steps == 5 else torch.randint(6, 10, (steps,)).tolist()
    keys = [torch.randn(r, d) for r in rows_at]
    values = [torch.randn(r, d) for r in rows_at]
    table = torch.stack([torch.randint(0, r, (rows,)) for r in rows_at], dim=1).to(torch.int32)
    k_cols = torch.tensor([k.data_ptr() for k in keys])
    v_cols = torch.tensor([v.data_ptr() for v in values])
    q = torch.randn(rows, d)
    got = ops.self_attention(q, k_cols, v_cols, d, table, heads)
    k = torch.stack([keys[s][table[:, s].long()] for s in range(steps)], dim=1)  # (N, T, D)
    v = torch.stack([values[s][table[:, s].long()] for s in range(steps)], dim=1)
    split = lambda x: x.view(rows, -1, heads, head_dim).transpose(1, 2)  # (N, H, T, dh)
    want = F.scaled_dot_product_attention(split(q.unsqueeze(1)), split(k), split(v)).transpose(1, 2).reshape(rows, d)
    assert_close_for(got, want, ops=head_dim + steps)  # a dot product over dh, a softmax and a sum over the steps


def test_cross_attention_reads_each_rows_sentence_and_masks_padding():
    torch.manual_seed(1)
    heads, head_dim, sentences, length = 4, 32, 3, 7
    d = heads * head_dim
    k, v = torch.randn(sentences, length, d), torch.randn(sentences, length, d)
    keep = torch.ones(sentences, length, dtype=torch.uint8)
    keep[1, 4:] = 0
    keep[2, :] = 0  # no key at all: zero probabilities and output, not NaN
    sentence = torch.tensor([0, 0, 1, 1, 1, 2], dtype=torch.int32)
    q = torch.randn(6, d)
    out, attention = ops.cross_attention(q, k, v, sentence, keep, heads, need_attention=True)
    split = lambda x: x.view(x.shape[0], -1, heads, head_dim).transpose(1, 2)
    rows = sentence.long()
    scores = split(q.unsqueeze(1)) @ split(k[rows]).transpose(-1, -2) / math.sqrt(head_dim)  # (N, H, 1, S)
    scores = scores.masked_fill(keep[rows].eq(0)[:, None, None, :], float("-inf"))
    want_probs = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
    want = (want_probs @ split(v[rows])).transpose(1, 2).reshape(6, d)
    # a dot product over dh, a softmax and a weighted sum over the source, a mean over the heads
    assert_close_for(attention, want_probs.squeeze(2).mean(dim=1), ops=head_dim + length + heads)
    assert_close_for(out, want, ops=head_dim + length)
    assert attention[5].abs().sum().item() == 0 and out[5].abs().sum().item() == 0
    assert attention[2:5, 4:].abs().sum().item() == 0
    plain, none = ops.cross_attention(q, k, v, sentence, keep, heads, need_attention=False)
    assert none is None and torch.equal(plain, out)


def test_beam_candidates_equal_top_candidates_of_the_masked_log_softmax():
    torch.manual_seed(2)
    n, beams, vocab, count, eos = 4, 3, 1000, 6, 2
    logits = torch.randn(n * beams, vocab) * 4
    scores = -torch.rand(n, beams) * 5
    scores[1, 1:] = float("-inf")  # a first step: one live beam
    banned = torch.zeros(vocab, dtype=torch.uint8)
    banned[[0, 1]] = 1
    eos_only = torch.tensor([0, 0, 1, 0], dtype=torch.uint8)
    values, index = ops.beam_candidates(logits, scores, banned, eos_only, eos, count)

    log_probs = torch.log_softmax(logits, dim=-1)
    log_probs[:, [0, 1]] = float("-inf")
    rows = torch.arange(2 * beams, 3 * beams)
    log_probs[rows] = log_probs[rows].masked_fill(torch.arange(vocab) != eos, float("-inf"))
    want_values, want_index = top_candidates(scores, log_probs, count, blocked=False)
    assert_close_for(values, want_values, ops=vocab)  # a log-sum-exp over the vocabulary
    finite = want_values > float("-inf")
    assert torch.equal(index[finite], want_index[finite])
    # Sentence 2 has only its beams' EOS: three candidates, then -inf padding.
    assert finite[2].tolist() == [True] * 3 + [False] * 3
    assert values[2, 3:].tolist() == [float("-inf")] * 3
    assert sorted(index[2, :3].tolist()) == [eos, vocab + eos, 2 * vocab + eos]


def test_beam_candidates_never_pick_banned_tokens_even_when_they_lead():
    logits = torch.zeros(2, 50)
    logits[:, 7] = 30.0  # banned, far ahead of every other token
    logits[0, 3], logits[1, 4] = 2.0, 5.0
    banned = torch.zeros(50, dtype=torch.uint8)
    banned[7] = 1
    values, index = ops.beam_candidates(logits, torch.tensor([[0.0, -1.0]]), banned, None, 2, 2)
    assert index.tolist() == [[50 + 4, 3]]  # beam 1's token 4 (-1 + 5 - lse) beats beam 0's token 3 (2 - lse)
    assert_close_for(values[0, 1], torch.log_softmax(logits[0], -1)[3], ops=50)  # a log-sum-exp over 50 tokens


def test_the_kernels_refuse_what_they_cannot_read():
    q = torch.randn(2, 8, dtype=torch.float64)
    table = torch.zeros(2, 1, dtype=torch.int32)
    cols = torch.zeros(1, dtype=torch.long)
    with pytest.raises(ValueError, match="q must be a CPU torch.float32 tensor"):
        ops.self_attention(q, cols, cols, 8, table, 2)
    with pytest.raises(ValueError, match=r"table \(3, 1\) does not match q \(2, 8\)"):
        ops.self_attention(q.float(), cols, cols, 8, torch.zeros(3, 1, dtype=torch.int32), 2)
    with pytest.raises(ValueError, match="k_columns must be a CPU torch.int64 tensor"):
        ops.self_attention(q.float(), cols.int(), cols, 8, table, 2)
    with pytest.raises(ValueError, match="y must be a CPU torch.float32 tensor"):
        ops.add_layer_norm(q.float(), q, torch.ones(8), torch.zeros(8), 1e-5)
    with pytest.raises(ValueError, match="bias must be a CPU torch.float32 tensor"):
        ops.add_layer_norm(q.float(), None, torch.ones(8), torch.zeros(8, dtype=torch.float16), 1e-5)
    with pytest.raises(ValueError, match="cannot take 7 candidates of 1 beams over 3 tokens"):
        ops.beam_candidates(torch.zeros(1, 3), torch.zeros(1, 1), torch.zeros(3, dtype=torch.uint8), None, 2, 7)


def test_switched_off_the_kernels_say_why():
    code = "from model import cpu_kernels as k; print(k.library() is None, '|', k.unavailable())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PHRASAL_CPU_KERNELS": "off", "PATH": ""}, cwd=str(cpu_kernels.SOURCE.parents[2]))
    assert done.stdout.strip() == "True | PHRASAL_CPU_KERNELS=off"


def test_without_a_compiler_the_kernels_are_unavailable_not_broken(tmp_path):
    code = "from model import cpu_kernels as k; print(k.library() is None, '|', k.unavailable())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PATH": str(tmp_path), "CC": "no-such-cc", "PHRASAL_KERNEL_CACHE": str(tmp_path)},
                          cwd=str(cpu_kernels.SOURCE.parents[2]))
    assert done.stdout.strip() == "True | no C compiler (cc or gcc) on PATH"


def test_add_layer_norm_is_the_residual_sum_and_its_layer_norm():
    torch.manual_seed(3)
    x, y = torch.randn(7, 48), torch.randn(7, 48)
    norm = torch.nn.LayerNorm(48)
    torch.nn.init.normal_(norm.weight)
    torch.nn.init.normal_(norm.bias)
    with torch.no_grad():
        total, normed = ops.add_layer_norm(x, y, norm.weight, norm.bias, norm.eps)
        assert torch.equal(total, x + y)
        assert_close_for(normed, norm(x + y), ops=2 * 48)  # mean and variance over 48 features
        alone, normed_x = ops.add_layer_norm(x, None, norm.weight, norm.bias, norm.eps)
        assert alone is x or torch.equal(alone, x)
        assert_close_for(normed_x, norm(x), ops=2 * 48)
