"""The phrasal attention equations, checked against explicit loops and hand-computed numbers."""
import math

import pytest
import torch

from model.attention.convkv import ConvKVAttention
from model.attention.functional import masked_softmax
from model.attention.ngram_windows import (
    causal_key_mask,
    fused_ngram_conv,
    ngram_valid,
    phrase_table,
    spread_to_tokens,
    strided_merge_windows,
)
from model.attention.queryk import QueryKAttention, queryk_scores
from model.attention.vanilla import VanillaAttention
from model.config import AttentionConfig
from tests.helpers import tiny_model
from tests.helpers import HAND_FORMULA_OPS, TINY_MODEL_OPS, assert_close_for

KINDS = {"convkv": ConvKVAttention, "queryk": QueryKAttention}
STRUCTURES = {
    "homogeneous": {"structure": "homogeneous", "ngrams": [1, 2, 3], "heads_per_ngram": [1, 2, 1]},
    "heterogeneous": {"structure": "heterogeneous", "ngrams": [1, 2, 3]},
    "interleaved": {"structure": "interleaved"},
}
SITES = ("encoder_self", "decoder_self", "cross")
D, H = 8, 4


def module(kind, structure, site, seed=0):
    torch.manual_seed(seed)
    m = KINDS[kind](D, H, 0.0, site, STRUCTURES[structure]).eval()
    with torch.no_grad():  # non-zero biases, so that the zero rows before position 0 are tested too
        for p in m.parameters():
            if p.dim() == 1:
                p.normal_()
    return m


# -- an explicit, loop-by-loop reading of the equations ---------------------------------------
def reference(m, x, source, pad):
    """One sentence: x (T, D) queries, source (S, D) keys/values, pad (S,) bool -> out (T, D),
    token probs (H, T, S), phrases (H, T, n_max, S). Every sum and window written out."""
    T, S, dh = x.shape[0], source.shape[0], D // H
    n_max = m.spec.n_max
    causal = m.site == "decoder_self"
    padded = m.spec.edge == "padded"

    def row(seq, i):
        return seq[i] if i >= 0 else torch.zeros(D)

    def exists(s, n, pad=pad):  # the source-side rule; decoder self-attention keeps left-padded windows
        if causal:
            return True
        if s - n + 1 < 0 and not padded:  # edge "inside": no window reaches before position 0
            return False
        return not any(bool(pad[i]) for i in range(max(s - n + 1, 0), s + 1))

    def conv(module, seq, end, n):  # b + Σ_m W[:, :, m] x_{end-n+1+m}: a width-n convolution, left zero-padded
        return module.bias + sum(module.weight[:, :, j] @ row(seq, end - n + 1 + j) for j in range(n))

    def query_vector(t, stream):
        return m.q_proj(x[t]) if stream == 1 else conv(m.q_bigram, x, t, 2)

    streams = (2, 1) if m.spec.interleaved else (1,)
    context = {st: torch.zeros(T, D) for st in streams}
    probs = torch.zeros(len(streams), H, T, S)
    phrases = torch.zeros(len(streams), H, T, n_max, S)
    head = 0
    q_offset = 0
    for g, group in enumerate(m.spec.groups):
        for local in range(group.heads):
            for si, st in enumerate(streams):
                for t in range(T):
                    qv = query_vector(t, st)
                    entries = []  # (s, n, score, value)
                    for i, n in enumerate(group.ngrams):
                        for s in range(S):
                            if not exists(s, n) or (causal and s > t):
                                continue
                            if m.kind == "convkv":
                                k = conv(m.keys[g][i], source, s, n).view(group.heads, dh)[local]
                                v = conv(m.values[g][i], source, s, n).view(group.heads, dh)[local]
                                q = qv.view(H, dh)[head]
                                score = q @ k / math.sqrt(dh)
                            else:
                                width = group.heads * sum(group.ngrams) * dh
                                kernels = qv[q_offset : q_offset + width].view(group.heads, -1)[local]
                                start = sum(group.ngrams[:i]) * dh
                                kernel = kernels[start : start + n * dh]
                                keys = torch.cat([
                                    m.k_proj(source[j]).view(H, dh)[head] if j >= 0 else torch.zeros(dh)
                                    for j in range(s - n + 1, s + 1)
                                ])
                                score = kernel @ keys / math.sqrt(n * dh)
                                v = conv(m.values[g][i], source, s, n).view(group.heads, dh)[local]
                            entries.append((s, n, score, v))
                    if not entries:
                        continue
                    weights = torch.softmax(torch.stack([e[2] for e in entries]), 0)
                    for (s, n, _, v), w in zip(entries, weights):
                        context[st][t, head * dh : (head + 1) * dh] += w * v
                        start = s - n + 1
                        if start < 0 and not causal:  # edge "padded": the window is the phrase 0..s
                            for j in range(s + 1):
                                probs[si, head, t, j] += w / (s + 1)
                            phrases[si, head, t, s, 0] += w
                            continue
                        # Weight on the zero rows before position 0 (decoder side) reaches no token.
                        for j in range(max(start, 0), s + 1):
                            probs[si, head, t, j] += w / n
                        if start >= 0:
                            phrases[si, head, t, n - 1, start] += w
            head += 1
        if m.kind == "queryk":
            q_offset += group.heads * sum(group.ngrams) * dh
    if not m.spec.interleaved:
        return m.out_proj(context[1]), probs[0], phrases[0]
    # §3.3 (I_enc, I_dec): a bigram query that does not exist leaves a zero slot, and only the kept
    # streams' attention is reported (the mean of the two, or the unigram one alone).
    if m.site == "encoder_self":
        kept = [exists(t, 2, pad[:T]) for t in range(T)]  # the encoder's queries are its source rows
    else:
        kept = [t > 0 or padded for t in range(T)]  # I_dec = (0, u_1, b_1, ...) for edge "inside"
    for t in range(T):
        if not kept[t]:
            context[2][t] = 0.0
    if m.site == "encoder_self":
        outs = [m.merge(torch.cat([context[2][t], context[1][t], context[2][t + 1] if t + 1 < T else torch.zeros(D)]))
                for t in range(T)]
    else:
        outs = [m.merge(torch.cat([context[2][t], context[1][t]])) for t in range(T)]
    for t in range(T):
        if kept[t]:
            probs[1, :, t] = (probs[0, :, t] + probs[1, :, t]) / 2
            phrases[1, :, t] = (phrases[0, :, t] + phrases[1, :, t]) / 2
    return torch.stack(outs), probs[1], phrases[1]


@pytest.mark.parametrize("site", SITES)
@pytest.mark.parametrize("structure", list(STRUCTURES))
@pytest.mark.parametrize("kind", list(KINDS))
def test_module_equals_the_equations_written_as_loops(kind, structure, site):
    m = module(kind, structure, site)
    torch.manual_seed(1)
    x = torch.randn(2, 5, D)
    memory = torch.randn(2, 4, D) if site == "cross" else None
    source = x if memory is None else memory
    pad = torch.zeros(2, source.shape[1], dtype=torch.bool)
    if site != "decoder_self":
        pad[1, -2:] = True  # the second sentence is 2 rows shorter
    with torch.no_grad():
        got = m(x, memory, key_padding_mask=pad if site != "decoder_self" else None,
                causal=site == "decoder_self", need_weights=True, need_phrase_attention=True)
        out, probs, phrases = got.out, got.probs, got.phrase_attention
        for b in range(2):
            length = int((~pad[b]).sum())
            rows = length if site == "encoder_self" else x.shape[1]
            ref_out, ref_probs, ref_phrases = reference(m, x[b, :rows], source[b], pad[b])
            assert_close_for(out[b, :rows], ref_out, ops=TINY_MODEL_OPS)
            assert_close_for(probs[b, :, :rows], ref_probs, ops=TINY_MODEL_OPS)
            assert_close_for(phrases[b, :, :rows], ref_phrases, ops=TINY_MODEL_OPS)


# -- hand-computed single numbers -------------------------------------------------------------
def test_convkv_bigram_key_is_the_convolution_of_its_two_rows():
    m = module("convkv", "heterogeneous", "encoder_self")
    x = torch.randn(1, 4, D)
    with torch.no_grad():
        k, v = m._keys_values(m._project(x, m._source_parts(), 0))  # (1, H, S, G, dh)
        for conv, out in ((m.keys[0][1], k), (m.values[0][1], v)):  # n = 2: weight (H·dh, D, 2), taps (x_{s-1}, x_s)
            w0, w1 = conv.weight[:, :, 0], conv.weight[:, :, 1]
            s = 2
            assert_close_for(out[0, :, s, 1].reshape(-1), w0 @ x[0, s - 1] + w1 @ x[0, s] + conv.bias, ops=TINY_MODEL_OPS)
            # Position 0's bigram reaches back to a zero row: only W_1 and the bias act.
            assert_close_for(out[0, :, 0, 1].reshape(-1), w1 @ x[0, 0] + conv.bias, ops=TINY_MODEL_OPS)


def test_queryk_score_of_one_query_over_one_bigram():
    # One head, d_k = 2: the kernel is 2·2 numbers, the bigram (k_1, k_2) is concat(k_1, k_2).
    q = torch.tensor([1.0, 2.0, 3.0, -1.0]).view(1, 1, 1, 4)
    k = torch.tensor([[0.5, 0.0], [1.0, -2.0], [4.0, 1.0]]).view(1, 1, 3, 2)
    scores = queryk_scores(q, k, (2,)).view(3)  # bigrams ending at s = 0, 1, 2
    kernel = torch.tensor([1.0, 2.0, 3.0, -1.0])
    assert scores[2].item() == pytest.approx(kernel @ torch.tensor([1.0, -2.0, 4.0, 1.0]) / math.sqrt(2 * 2))
    assert scores[2].item() == pytest.approx((1.0 - 4.0 + 12.0 - 1.0) / 2.0)
    # The bigram ending at 0 is (zero row, k_0): only the second half of the kernel acts.
    assert scores[0].item() == pytest.approx((3.0 * 0.5) / 2.0)


def test_queryk_unigram_kernels_are_scaled_dot_products():
    # Sizes (1,): each kernel is a plain query; the score is q·k / √dh, or q·k when prescaled.
    q = torch.tensor([1.0, 2.0, 0.0, -1.0, 0.5, 1.0]).view(1, 2, 1, 3)  # 2 heads, dh = 3
    k = torch.tensor([[1.0, 1.0, 1.0], [0.0, 2.0, 4.0], [2.0, 0.0, -2.0], [1.0, 0.0, 1.0]]).view(1, 2, 2, 3)
    dots = torch.tensor([[3.0, 4.0], [-4.0, 0.0]]).view(1, 2, 1, 2)
    assert_close_for(queryk_scores(q, k, (1,)), dots / math.sqrt(3), ops=TINY_MODEL_OPS)
    assert_close_for(queryk_scores(q, k, (1,), prescaled=True), dots, ops=TINY_MODEL_OPS)


def test_queryk_unigram_and_bigram_scores_share_one_softmax():
    q = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0]).view(1, 1, 1, 6)  # kernel 1: (1, 0); kernel 2: (0, 0, 1, 1)
    k = torch.tensor([[2.0, 0.0], [0.0, 2.0]]).view(1, 1, 2, 2)
    scores = queryk_scores(q, k, (1, 2)).view(2, 2)  # [n-1, s]
    # Unigrams: s=0 2/√2, s=1 0. Bigrams: s=0 (zero row, k_0) 2/√4, s=1 (k_0, k_1) 2/√4.
    expected = torch.tensor([[2.0 / math.sqrt(2), 0.0], [1.0, 1.0]])
    assert_close_for(scores, expected, ops=HAND_FORMULA_OPS)
    hidden = torch.tensor([[False, False], [True, False]]).view(1, 4)  # the bigram ending at 0 starts before 0
    probs = masked_softmax(scores.view(1, 4), hidden).view(2, 2)
    e = torch.exp(torch.tensor([math.sqrt(2), 0.0, 1.0]))
    assert_close_for(probs, torch.stack([e[0], e[1], torch.tensor(0.0), e[2]]).view(2, 2) / e.sum(), ops=HAND_FORMULA_OPS)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("structure", ["homogeneous", "heterogeneous"])
def test_unigram_only_heads_are_vanilla_heads(kind, structure):
    options = {"structure": structure, "ngrams": [1]}
    torch.manual_seed(0)
    vanilla = VanillaAttention(D, H, 0.0, "cross", {}).eval()
    phrasal = KINDS[kind](D, H, 0.0, "cross", options).eval()
    with torch.no_grad():
        phrasal.q_proj.load_state_dict(vanilla.q_proj.state_dict())
        phrasal.out_proj.load_state_dict(vanilla.out_proj.state_dict())
        if kind == "convkv":
            phrasal.keys[0][0].weight.copy_(vanilla.k_proj.weight.unsqueeze(-1))
            phrasal.keys[0][0].bias.copy_(vanilla.k_proj.bias)
        else:
            phrasal.k_proj.load_state_dict(vanilla.k_proj.state_dict())
        phrasal.values[0][0].weight.copy_(vanilla.v_proj.weight.unsqueeze(-1))
        phrasal.values[0][0].bias.copy_(vanilla.v_proj.bias)
        x, memory = torch.randn(2, 3, D), torch.randn(2, 5, D)
        pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
        a = vanilla(x, memory, key_padding_mask=pad, need_weights=True)
        a_out, a_probs = a.out, a.probs
        b = phrasal(x, memory, key_padding_mask=pad, need_weights=True)
        b_out, b_probs = b.out, b.probs
    assert_close_for(b_out, a_out, ops=TINY_MODEL_OPS)
    assert_close_for(b_probs, a_probs, ops=TINY_MODEL_OPS)


# -- masks ------------------------------------------------------------------------------------
def test_ngram_validity_follows_the_source_side_rule():
    pad = torch.tensor([[False, False, False, True], [False, False, False, False]])
    # The n-gram at index s ends at s: it must start at 0 or later and touch no padding.
    assert ngram_valid(pad, 4, 1, pad.device).tolist() == [[True, True, True, False], [True] * 4]
    assert ngram_valid(pad, 4, 2, pad.device).tolist() == [[False, True, True, False], [False, True, True, True]]
    assert ngram_valid(pad, 4, 3, pad.device).tolist() == [[False, False, True, False], [False, False, True, True]]
    assert ngram_valid(None, 2, 3, pad.device).tolist() == [[False, False]]  # shorter than n: none


def test_causal_mask_sees_only_ngrams_ending_in_the_past():
    hidden = causal_key_mask(3, 3, 2, torch.device("cpu")).view(3, 2, 3)  # [t, g, s]
    assert hidden[:, 0].tolist() == [[False, True, True], [False, False, True], [False, False, False]]
    assert torch.equal(hidden[:, 0], hidden[:, 1])
    # An incremental step (the last of 3 positions) sees everything.
    assert not causal_key_mask(1, 3, 2, torch.device("cpu")).any()


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_source_shorter_than_n_softmaxes_over_the_other_sizes(kind):
    m = KINDS[kind](D, H, 0.0, "cross", {"structure": "heterogeneous", "ngrams": [1, 2, 3]})
    x = torch.randn(1, 2, D)
    memory = torch.randn(1, 4, D, requires_grad=True)
    pad = torch.tensor([[False, False, True, True]])  # 2 real tokens: no trigram exists
    got = m(x, memory, key_padding_mask=pad, need_weights=True, need_phrase_attention=True)
    out, probs, phrases = got.out, got.probs, got.phrase_attention
    assert torch.isfinite(out).all()
    assert phrases[..., 2, :].abs().max().item() == 0.0
    assert_close_for(phrases.sum((-1, -2)), torch.ones(1, H, 2), ops=TINY_MODEL_OPS)
    assert_close_for(probs.sum(-1), torch.ones(1, H, 2), ops=TINY_MODEL_OPS)
    out.sum().backward()
    assert torch.isfinite(memory.grad).all()


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_head_without_any_ngram_outputs_zeros_not_nan(kind):
    # Edge "inside" (not the homogeneous default): no trigram reaches before position 0.
    options = {"structure": "homogeneous", "ngrams": [1, 3], "heads_per_ngram": [2, 2], "edge": "inside"}
    m = KINDS[kind](D, H, 0.0, "encoder_self", options)
    x = torch.randn(1, 2, D, requires_grad=True)  # 2 tokens: the trigram heads see nothing
    probs = m(x, key_padding_mask=torch.tensor([[False, False]]), need_weights=True).probs
    assert_close_for(probs[0, :2].sum(-1), torch.ones(2, 2), ops=TINY_MODEL_OPS)
    assert probs[0, 2:].abs().max().item() == 0.0
    out = m(x, key_padding_mask=torch.tensor([[False, False]])).out  # the fused path
    out.sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(x.grad).all()


# -- pure helpers -----------------------------------------------------------------------------
def test_ngram_weights_spread_over_their_tokens_and_move_to_their_start():
    # Sizes (1, 2), S = 3: [g, s]; the bigram ending at 2 covers tokens 1 and 2.
    p = torch.tensor([[0.1, 0.2, 0.0], [0.0, 0.3, 0.4]])
    assert_close_for(spread_to_tokens(p, (1, 2)), [0.1 + 0.15, 0.2 + 0.15 + 0.2, 0.2], ops=HAND_FORMULA_OPS)
    table = phrase_table(p, (1, 2), 3)  # [n-1, start]
    assert_close_for(table, [[0.1, 0.2, 0.0], [0.3, 0.4, 0.0], [0.0, 0.0, 0.0]], ops=HAND_FORMULA_OPS)


def test_a_source_shorter_than_the_widest_ngram_keeps_its_width_in_the_phrase_table():
    # S = 1 with sizes 1..3: no bigram or trigram fits (their logits are masked to 0), the table is (3, 1).
    p = torch.tensor([[[1.0], [0.0], [0.0]]])
    assert phrase_table(p, (1, 2, 3), 3).tolist() == [[[1.0], [0.0], [0.0]]]


@pytest.mark.parametrize("kind", ["convkv", "queryk"])
def test_a_source_of_eos_alone_decodes_with_phrases(kind):
    # Heterogeneous 1-2-3 on a one-position source (what an empty text encodes to): all the
    # weight is on the one unigram, at every step, in the phrase table as in the token attention.
    attention = AttentionConfig(kind, {"structure": "heterogeneous", "ngrams": [1, 2, 3]})
    model = tiny_model(encoder_self_attention=attention, decoder_self_attention=attention, cross_attention=attention)
    state = model.init_state(model.encode(torch.tensor([[2]])))
    tokens = torch.tensor([1])
    for _ in range(3):
        out = model.decode_step(tokens, state, need_phrase_attention=True)
        assert out.phrase_attention.tolist() == [[[1.0], [0.0], [0.0]]] and out.attention.tolist() == [[1.0]]
        state, tokens = out.state, out.log_probs.argmax(-1)


def test_interleaved_rows_merge_by_strided_windows():
    uni = torch.tensor([[1.0], [2.0], [3.0]]).view(1, 3, 1)
    bi = torch.tensor([[10.0], [20.0], [30.0]]).view(1, 3, 1)
    rows = torch.stack([bi, uni], dim=2).view(1, 6, 1)  # (B, 2T, C): bigram t, then unigram t
    assert rows.view(-1).tolist() == [10.0, 1.0, 20.0, 2.0, 30.0, 3.0]
    # Decoder: window 2 stride 2 = [bigram(t-1, t), unigram t]: nothing after t.
    assert strided_merge_windows(rows, 2).view(3, 2).tolist() == [[10.0, 1.0], [20.0, 2.0], [30.0, 3.0]]
    # Encoder: window 3 stride 2 = [bigram(t-1, t), unigram t, bigram(t, t+1)], zero after the end.
    assert strided_merge_windows(rows, 3).view(3, 3).tolist() == [[10.0, 1.0, 20.0], [20.0, 2.0, 30.0], [30.0, 3.0, 0.0]]


def test_one_convolution_runs_every_width_with_left_zero_padding():
    x = torch.tensor([1.0, 2.0, 3.0]).view(1, 3, 1)  # (B, S, D)
    unigram = torch.tensor([[[10.0]]])  # (C, D, 1)
    bigram = torch.tensor([[[1.0, 100.0]]])  # taps (x_{s-1}, x_s)
    out = fused_ngram_conv(x, [unigram, bigram], [torch.zeros(1), torch.tensor([0.5])])
    assert out.tolist() == [[[10.0, 100.5], [20.0, 201.5], [30.0, 302.5]]]  # (B, S, C)
    # From position 1 on, the windows still reach back into row 0.
    assert fused_ngram_conv(x, [unigram, bigram], [torch.zeros(1), torch.tensor([0.5])], offset=1).tolist() == [
        [[20.0, 201.5], [30.0, 302.5]]
    ]
    # A trigram from position 1 reaches before row 0 (a zero row); from position 2 on it does not.
    x = torch.tensor([1.0, 2.0, 3.0, 4.0]).view(1, 4, 1)
    trigram = torch.tensor([[[1.0, 10.0, 100.0]]])  # taps (x_{s-2}, x_{s-1}, x_s)
    assert fused_ngram_conv(x, [trigram], [torch.zeros(1)], offset=1).tolist() == [[[210.0], [321.0], [432.0]]]
    assert fused_ngram_conv(x, [trigram], [torch.zeros(1)], offset=2).tolist() == [[[321.0], [432.0]]]


def test_the_queryk_module_scales_each_ngram_by_its_own_width():
    # The module end to end on hand numbers (the functional tests above call queryk_scores, which
    # scales unless told the module did it): one head, d = dh = 2, sizes (1, 2) in one softmax.
    # q_proj gives every query the kernels of test_queryk_unigram_and_bigram_scores_share_one_softmax,
    # k_proj is the identity, so the phrase table must be that test's probabilities.
    m = QueryKAttention(2, 1, 0.0, "cross", {"structure": "heterogeneous", "ngrams": [1, 2]}).eval()
    with torch.no_grad():
        m.q_proj.weight.zero_()
        m.q_proj.bias.copy_(torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0]))  # kernel 1: (1, 0); kernel 2: (0, 0, 1, 1)
        m.k_proj.weight.copy_(torch.eye(2))
        m.k_proj.bias.zero_()
    memory = torch.tensor([[[2.0, 0.0], [0.0, 2.0]]])
    phrases = m(torch.zeros(1, 1, 2), memory, need_weights=True, need_phrase_attention=True).phrase_attention
    # Scores: unigrams 2/√(1·2) and 0; bigram (k_0, k_1) 2/√(2·2); no bigram starts at 1.
    e = torch.exp(torch.tensor([math.sqrt(2), 0.0, 1.0]))
    expected = torch.stack([e[0], e[1], e[2], torch.tensor(0.0)]).view(2, 2) / e.sum()  # [n-1, start]
    assert_close_for(phrases[0, 0, 0], expected, ops=TINY_MODEL_OPS)


@pytest.mark.parametrize("structure", list(STRUCTURES))
def test_queryk_keeps_only_learned_parameters_in_its_state(structure):
    # Its scale and kernel-row constants are rebuilt from the config, never stored with the
    # weights, so a saved QueryK model holds exactly its parameters.
    m = module("queryk", structure, "cross")
    assert set(m.state_dict()) == {name for name, _ in m.named_parameters()}


# -- the sentence edge ("Phrase-Based Attentions" §3.2.1 left padding; §3.3 I_dec leading zero) -----
def one_head(kind, structure, site, edge, ngrams=(2,)):
    """d = dh = 2, one head: value convolutions and output projections set by hand."""
    options = {"structure": structure, "ngrams": list(ngrams), "edge": edge}
    m = KINDS[kind](2, 1, 0.0, site, options).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
    return m


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_one_token_source_through_a_bigram_head_gives_the_left_padded_window(kind):
    # Homogeneous bigram head, cross-attention over the one-token source x_0 = (1, 1). The bigram
    # ending at 0 is the window (zero row, x_0): its value is W_1 x_0 + b = (1+2, 3+4) + (0.5, -0.5).
    # It is the only key, so it takes all the weight; out_proj is the identity.
    m = one_head(kind, "homogeneous", "cross", "padded")
    with torch.no_grad():
        value = m.values[0][0]  # Conv1d(2, 2, 2): taps (x_{s-1}, x_s)
        value.weight[:, :, 0] = torch.tensor([[100.0, 100.0], [100.0, 100.0]])  # meets the zero row only
        value.weight[:, :, 1] = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
        value.bias.copy_(torch.tensor([0.5, -0.5]))
        m.out_proj.weight.copy_(torch.eye(2))
    memory = torch.tensor([[[1.0, 1.0]]])
    got = m(torch.zeros(1, 1, 2), memory, key_padding_mask=torch.tensor([[False]]), need_weights=True, need_phrase_attention=True)
    assert got.out.view(2).tolist() == [3.5, 6.5]
    # The padded window is the phrase of its one real token: all weight on the token, on the phrase (start 0, length 1).
    assert got.probs.view(-1).tolist() == [1.0]
    assert got.phrase_attention.view(2, 1).tolist() == [[1.0], [0.0]]
    # Edge "inside" (the earlier rule): the bigram does not exist, the head sees nothing and outputs zeros.
    inside = one_head(kind, "homogeneous", "cross", "inside")
    inside.load_state_dict(m.state_dict())
    assert inside(torch.zeros(1, 1, 2), memory, key_padding_mask=torch.tensor([[False]])).out.view(2).tolist() == [0.0, 0.0]


def test_a_padded_bigram_at_the_start_shares_its_weight_with_its_real_tokens_only():
    # Sizes (1, 2), S = 3, [g, s]: the bigram ending at 0 covers token 0 alone.
    p = torch.tensor([[0.1, 0.2, 0.0], [0.2, 0.1, 0.4]])
    assert_close_for(spread_to_tokens(p, (1, 2), clipped=True), [0.1 + 0.2 + 0.05, 0.2 + 0.05 + 0.2, 0.2], ops=HAND_FORMULA_OPS)
    table = phrase_table(p, (1, 2), 2, clipped=True)  # [n-1, start]
    assert_close_for(table, [[0.1 + 0.2, 0.2, 0.0], [0.1, 0.4, 0.0]], ops=HAND_FORMULA_OPS)


def test_padded_edge_masks_padding_only():
    pad = torch.tensor([[False, False, True]])
    assert ngram_valid(pad, 3, 2, pad.device, padded=True).tolist() == [[True, True, False]]
    assert ngram_valid(None, 1, 3, pad.device, padded=True).tolist() == [[True]]


@pytest.mark.parametrize("site", ["decoder_self", "cross"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_the_interleaved_decoder_sequence_starts_with_a_zero_slot(kind, site):
    # §3.3: I_dec = (0, u_1, b_1, u_2, ...), merged by windows of 2, stride 2: output t reads
    # (b_{t-1}, u_t), so output 0 reads (0, u_0). The merge here passes the bigram slot alone.
    torch.manual_seed(0)
    m = KINDS[kind](2, 1, 0.0, site, {"structure": "interleaved", "edge": "inside"}).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.normal_()
        m.merge.weight.copy_(torch.cat([torch.eye(2), torch.zeros(2, 2)], dim=1))  # (D, 2D): [bigram slot | unigram slot]
        m.merge.bias.zero_()
    x = torch.randn(1, 3, 2)
    memory = torch.randn(1, 4, 2) if site == "cross" else None
    with torch.no_grad():
        full = m(x, memory, causal=site == "decoder_self", need_weights=True)
        assert full.out[0, 0].tolist() == [0.0, 0.0]
        assert full.out[0, 1:].abs().min().item() > 0.0  # later bigram slots are attention outputs
        # Incremental decoding carries the zero slot of the first step (the loop reference above
        # checks that position 0 reports the unigram stream's attention alone).
        state = m.init_state(memory, 1, x.device, x.dtype)
        for t in range(3):
            step = m.step(x[:, t : t + 1], state, need_weights=True)
            assert_close_for(step.out[:, 0], full.out[:, t], ops=TINY_MODEL_OPS)
            assert_close_for(step.probs[:, :, 0], full.probs[:, :, t, : step.probs.shape[-1]], ops=TINY_MODEL_OPS)
            state = step.state
        # Edge "padded": the bigram query over (zero row, x_0) fills the first slot.
        padded = KINDS[kind](2, 1, 0.0, site, {"structure": "interleaved", "edge": "padded"}).eval()
        padded.load_state_dict(m.state_dict())
        assert padded(x, memory, causal=site == "decoder_self").out[0, 0].abs().max().item() > 0.0
