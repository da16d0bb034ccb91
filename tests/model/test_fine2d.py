"""fine2d (Choi, Cho & Bengio, eq. 7-9): hand-computed numbers, the logit scale τ against vanilla's
spread, the tied-dimension reduction to vanilla attention, chunking, masks, incremental decoding =
full pass, cached = uncached search."""
import math

import pytest
import torch

from model.attention import fine2d_functional
from model.attention.fine2d import Fine2dAttention
from model.attention.fine2d_functional import fine2d_attention, fine2d_attention_chunked, score_scale, target_chunk
from model.attention.functional import attention_mask
from model.attention.vanilla import VanillaAttention
from model.config import AttentionConfig
from model.errors import ConfigError
from model.decoding.generate import generate
from model.decoding.options import DecodingOptions
from tests.helpers import assert_cached_search_equals_uncached, assert_incremental_equals_full_pass, assert_padding_changes_nothing, tiny_config, tiny_model
from tests.helpers import HAND_FORMULA_OPS, TINY_MODEL_OPS, assert_close_for

SRC = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0], [11, 2, 0, 0, 0]])
TGT_IN = torch.tensor([[1, 11, 12, 13, 14], [1, 15, 16, 0, 0], [1, 17, 0, 0, 0]])
FINE2D = AttentionConfig("fine2d")
HETEROGENEOUS_QUERYK = AttentionConfig("queryk", {"structure": "heterogeneous", "ngrams": [1, 2, 3]})
CONFIGS = {
    "cross": dict(cross_attention=FINE2D),
    "cross-no-key-term": dict(cross_attention=AttentionConfig("fine2d", {"key_term": False})),
    "cross-sqrt-head-dim": dict(cross_attention=AttentionConfig("fine2d", {"scale": "sqrt_head_dim"})),
    "cross-mlp": dict(cross_attention=AttentionConfig("fine2d", {"score": "mlp"})),
    "all-sites-mlp": {f"{site}_attention": AttentionConfig("fine2d", {"score": "mlp"})
                      for site in ("encoder_self", "decoder_self", "cross")},
    "all-sites": dict(cross_attention=FINE2D, encoder_self_attention=FINE2D, decoder_self_attention=FINE2D),
    "cross+queryk-self": dict(
        cross_attention=FINE2D, encoder_self_attention=HETEROGENEOUS_QUERYK, decoder_self_attention=HETEROGENEOUS_QUERYK
    ),
}


def model_for(name, seed=0):
    return tiny_model(seed=seed, **CONFIGS[name])


def random_heads(seed, b=2, h=3, t=5, s=4, dh=4):
    g = torch.Generator().manual_seed(seed)
    q, k, v, r = (torch.randn(b, h, n, dh, generator=g) for n in (t, s, s, s))  # (B, H, ·, dh)
    return q, k, v, r


# -- the equations --------------------------------------------------------------------------
def test_hand_computed_example():
    """One head, dₕ = 2, one query, two keys (and a masked third): every number by hand (eq. 7-9)."""
    q = torch.tensor([[[[2.0, -1.0]]]])  # (1, 1, 1, 2)
    k = torch.tensor([[[[1.0, 0.0], [0.0, 1.0], [5.0, 5.0]]]])  # (1, 1, 3, 2)
    v = torch.tensor([[[[10.0, 20.0], [30.0, 40.0], [99.0, 99.0]]]])
    r = torch.tensor([[[[math.sqrt(2), 0.0], [0.0, math.sqrt(2)], [9.0, 9.0]]]])
    mask = attention_mask(torch.tensor([[False, False, True]]), 1, 3, False, q.device)
    # At dₕ = 2 with the key term both scales are 1/√2: 1/√(two terms) and 1/√dₕ.
    assert score_scale("per_dimension", 2, True) == score_scale("sqrt_head_dim", 2, True) == 1 / math.sqrt(2)
    context, probs = fine2d_attention(q, k, v, r, mask, need_weights=True, scale=1 / math.sqrt(2))
    # e[s, d] = (q_d k_sd + r_sd) / √2: d=0 -> (√2 + 1, 0); d=1 -> (0, 1 - 1/√2); key 2 masked.
    a0 = math.exp(math.sqrt(2) + 1) / (math.exp(math.sqrt(2) + 1) + 1)
    a1 = 1 / (1 + math.exp(1 - 1 / math.sqrt(2)))
    expected_context = torch.tensor([a0 * 10 + (1 - a0) * 30, a1 * 20 + (1 - a1) * 40])
    expected_probs = torch.tensor([(a0 + a1) / 2, (2 - a0 - a1) / 2, 0.0])  # averaged over d (§5.2)
    assert_close_for(context[0, 0, 0], expected_context, ops=TINY_MODEL_OPS)
    assert_close_for(probs[0, 0, 0], expected_probs, ops=HAND_FORMULA_OPS)


def test_tied_dimensions_reduce_to_vanilla_attention_by_hand():
    """q[t, d] = a[t], k[s, d] = b[s] for every d, no key term: every dimension has the score
    a[t]b[s]/√dₕ, so fine2d is softmax(QKᵀ/√dₕ)V for the vanilla head Q = a·e₀, K = b·e₀ with
    the same logits."""
    g = torch.Generator().manual_seed(0)
    b, h, t, s, dh = 2, 3, 4, 5, 8
    a, c = torch.randn(b, h, t, 1, generator=g), torch.randn(b, h, s, 1, generator=g)
    v = torch.randn(b, h, s, dh, generator=g)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    mask = attention_mask(pad, t, s, False, v.device)
    context, probs = fine2d_attention(a.expand(b, h, t, dh), c.expand(b, h, s, dh), v, None, mask, need_weights=True,
                                      scale=score_scale("sqrt_head_dim", dh, False))
    e0 = torch.nn.functional.one_hot(torch.tensor(0), dh).float()
    Q, K = a * e0, c * e0  # (B, H, T, dh), (B, H, S, dh): one non-zero coordinate
    logits = (Q @ K.transpose(-2, -1) / math.sqrt(dh)).masked_fill(pad[:, None, None, :], float("-inf"))  # (B, H, T, S)
    weights = torch.softmax(logits, dim=-1)
    assert_close_for(probs, weights, ops=TINY_MODEL_OPS)
    assert_close_for(context, weights @ v, ops=TINY_MODEL_OPS)


def test_tied_fine2d_module_equals_the_vanilla_module():
    """Module level: projections built so that every dimension of a fine2d head repeats one
    query/key coordinate (key term zero) equal a vanilla module whose heads use that coordinate,
    when the single product is divided by √dₕ (scale "sqrt_head_dim")."""
    d, h = 16, 4
    dh = d // h
    torch.manual_seed(1)
    fine = Fine2dAttention(d, h, 0.0, "cross", {"scale": "sqrt_head_dim"}).eval()
    vanilla = VanillaAttention(d, h, 0.0, "cross", {}).eval()
    w_q, w_k = torch.randn(h, d), torch.randn(h, d)
    with torch.no_grad():
        fine.v_proj.load_state_dict(vanilla.v_proj.state_dict())
        fine.out_proj.load_state_dict(vanilla.out_proj.state_dict())
        fine.q_proj.weight.copy_(w_q.repeat_interleave(dh, 0))  # every row of head j is w_q[j]
        fine.k_proj.weight.copy_(w_k.repeat_interleave(dh, 0))
        for name, w in (("q_proj", w_q), ("k_proj", w_k)):
            weight = torch.zeros(d, d)
            weight[::dh] = w  # only the first coordinate of each vanilla head
            getattr(vanilla, name).weight.copy_(weight)
            getattr(vanilla, name).bias.zero_()
            getattr(fine, name).bias.zero_()
        fine.r_proj.weight.zero_()
        fine.r_proj.bias.zero_()
    x, memory = torch.randn(2, 3, d), torch.randn(2, 5, d)
    pad = torch.tensor([[False] * 5, [False, False, True, True, True]])
    f = fine(x, memory, key_padding_mask=pad, need_weights=True)
    out_f, probs_f = f.out, f.probs
    v = vanilla(x, memory, key_padding_mask=pad, need_weights=True)
    out_v, probs_v = v.out, v.probs
    assert_close_for(probs_f, probs_v, ops=TINY_MODEL_OPS)
    assert_close_for(out_f, out_v, ops=TINY_MODEL_OPS)


def test_per_dimension_softmax_with_the_new_scale_by_hand():
    """dₕ = 4, one query, two keys: τ = 1/√2 with the key term (scale "per_dimension"), 1/2 = 1/√dₕ
    for "sqrt_head_dim". Per dimension d, α[0, d] = 1 / (1 + exp(e[1, d] - e[0, d]))."""
    q = torch.tensor([[[[2.0, -1.0, 0.0, 1.0]]]])  # (1, 1, 1, 4)
    k = torch.tensor([[[[1.0, 0.0, 3.0, 2.0], [0.0, 1.0, -3.0, 2.0]]]])  # (1, 1, 2, 4)
    r = torch.tensor([[[[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]]])
    v = torch.tensor([[[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]]])
    # q_d k_sd + r_sd: key 0 -> (2, 0, 1, 2); key 1 -> (0, -1, 0, 3); differences e1 - e0 (unscaled):
    diffs = [-2.0, -1.0, -1.0, 1.0]
    for kind, tau in (("per_dimension", 1 / math.sqrt(2)), ("sqrt_head_dim", 0.5)):
        assert score_scale(kind, 4, True) == tau
        context, probs = fine2d_attention(q, k, v, r, None, need_weights=True, scale=tau)
        a0 = [1 / (1 + math.exp(tau * diff)) for diff in diffs]
        expected = torch.tensor([a * (d + 1) + (1 - a) * (d + 5) for d, a in enumerate(a0)])  # v0[d] = d+1, v1[d] = d+5
        assert_close_for(context[0, 0, 0], expected, ops=TINY_MODEL_OPS)
        assert_close_for(probs[0, 0, 0], torch.tensor([sum(a0) / 4, 1 - sum(a0) / 4]), ops=HAND_FORMULA_OPS)
    assert score_scale("per_dimension", 4, False) == 1.0  # one term: nothing to divide


def test_the_papers_score_network_by_hand():
    """f^d of eq. 7 in one head, dₕ = 2: e[s, d] = Σ_j W_o[d, j] tanh(q_j + k_sj), W_o = [[1, 2], [0, -1]];
    q = (0.5, -0.5), keys (0.5, 1.5) and (-0.5, 0.5): hidden tanh(1, 1) and tanh(0, 0) = 0."""
    q = torch.tensor([[[[0.5, -0.5]]]])
    k = torch.tensor([[[[0.5, 1.5], [-0.5, 0.5]]]])
    v = torch.tensor([[[[10.0, 20.0], [30.0, 40.0]]]])
    w = torch.tensor([[[1.0, 2.0], [0.0, -1.0]]])  # (H, dₕ, dₕ)
    t1 = math.tanh(1.0)
    e0 = [3 * t1, -t1]  # key 0, dimensions 0 and 1; key 1 scores 0 in both
    a0 = [1 / (1 + math.exp(-e)) for e in e0]  # softmax of (e, 0) over the two keys
    context, probs = fine2d_attention(q, k, v, None, None, need_weights=True, score_weight=w)
    assert_close_for(context[0, 0, 0], torch.tensor([a0[0] * 10 + (1 - a0[0]) * 30,
                                                     a0[1] * 20 + (1 - a0[1]) * 40]), ops=TINY_MODEL_OPS)
    assert_close_for(probs[0, 0, 0], torch.tensor([sum(a0) / 2, 1 - sum(a0) / 2]), ops=TINY_MODEL_OPS)


def test_the_score_network_chunked_equals_unchunked():
    q, k, v, _ = random_heads(5, t=7)
    w = torch.randn(q.shape[1], q.shape[-1], q.shape[-1], generator=torch.Generator().manual_seed(6))
    mask = attention_mask(torch.tensor([[False] * 4, [False, False, True, True]]), 7, 4, False, q.device)
    whole = fine2d_attention(q, k, v, None, mask, need_weights=True, score_weight=w)
    b, h, _, dh = q.shape
    chunked = fine2d_attention_chunked(q, k, v, None, mask, need_weights=True, budget=2 * 2 * b * h * dh * 4,
                                       score_weight=w)  # 2 target rows per chunk (the hidden layer halves the budget)
    assert_close_for(chunked[0], whole[0], ops=TINY_MODEL_OPS)
    assert_close_for(chunked[1], whole[1], ops=HAND_FORMULA_OPS)


def _row_spread(logits):
    """(std over the last dim, averaged over rows; entropy of its softmax, averaged over rows)."""
    p = torch.softmax(logits, dim=-1)
    return logits.std(-1, unbiased=False).mean().item(), (-(p * p.log()).sum(-1)).mean().item()


def test_the_new_scale_gives_vanilla_spread_on_a_hadamard_case():
    """Constructed so that every number is exact: dₕ = 4, T = S = 4, q = k = the Sylvester Hadamard
    matrix (entries ±1, orthogonal rows), no key term. Vanilla logits QKᵀ/√4 = 2I: each row is
    (2, 0, 0, 0), std √(4/4 − 1/4) = √3/2. Fine2d with τ = 1: q[t, d]·k[s, d] = ±1 over s, and a
    column of the Hadamard matrix has as many +1 as −1 except the first (all +1): rows of std 1 in
    three dimensions of four and of std 0 in the first: mean 3/4. With τ = 1/√dₕ = 1/2: 3/8."""
    hadamard = torch.tensor([[1.0, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1], [1, -1, -1, 1]])
    q = k = hadamard.view(1, 1, 4, 4)
    vanilla_std, vanilla_entropy = _row_spread(q @ k.transpose(-2, -1) / 2)
    assert_close_for(vanilla_std, math.sqrt(3) / 2, ops=HAND_FORMULA_OPS)
    p = math.exp(2) / (math.exp(2) + 3)
    assert_close_for(vanilla_entropy, -p * math.log(p) - 3 * (1 - p) / 3 * math.log((1 - p) / 3), ops=HAND_FORMULA_OPS)
    new_std, new_entropy = _row_spread(fine2d_functional.fine2d_scores(q, k, None, score_scale("per_dimension", 4, False)))
    old_std, old_entropy = _row_spread(fine2d_functional.fine2d_scores(q, k, None, score_scale("sqrt_head_dim", 4, False)))
    assert_close_for([new_std, old_std], [0.75, 0.375], ops=HAND_FORMULA_OPS)
    # A ±1 row (two of each) has the entropy of a two-level softmax: e and e⁻¹, or e^½ and e^-½.
    def two_level(x):
        hi, lo = math.exp(x) / (2 * math.exp(x) + 2 * math.exp(-x)), math.exp(-x) / (2 * math.exp(x) + 2 * math.exp(-x))
        return -2 * hi * math.log(hi) - 2 * lo * math.log(lo)
    assert_close_for(new_entropy, (math.log(4) + 3 * two_level(1.0)) / 4, ops=HAND_FORMULA_OPS)
    assert_close_for(old_entropy, (math.log(4) + 3 * two_level(0.5)) / 4, ops=HAND_FORMULA_OPS)


def test_a_fresh_layer_is_as_sharp_as_a_fresh_vanilla_layer():
    """Seeded fresh layers (the model's xavier init) on LayerNorm'd Gaussian inputs, d_model 128,
    4 heads (dₕ 32) as in the recipe, S = 20: the per-dimension scale gives logits as spread and
    softmaxes as entropic as vanilla's; dividing each product by √dₕ leaves them near uniform
    (max entropy ln 20 = 2.9957). The values are pinned for this seed; the ratios are the point."""
    torch.manual_seed(0)
    b, length, d, heads = 4, 20, 128, 4
    x = torch.nn.functional.layer_norm(torch.randn(b, length, d), (d,))
    memory = torch.nn.functional.layer_norm(torch.randn(b, length, d), (d,))
    split = lambda t: t.view(b, length, heads, d // heads).transpose(1, 2)  # (B, H, L, dh)
    torch.manual_seed(1)
    vanilla = tiny_model(d_model=d, n_heads=heads, d_ff=256).decoder_layers[0].cross_attention
    with torch.no_grad():
        v_logits = split(vanilla.q_proj(x)) @ split(vanilla.k_proj(memory)).transpose(-2, -1) / math.sqrt(d // heads)
        spreads = {"vanilla": _row_spread(v_logits)}
        for scale in ("per_dimension", "sqrt_head_dim"):
            torch.manual_seed(1)
            fine = tiny_model(d_model=d, n_heads=heads, d_ff=256,
                              cross_attention=AttentionConfig("fine2d", {"scale": scale})).decoder_layers[0].cross_attention
            logits = fine2d_functional.fine2d_scores(split(fine.q_proj(x)), split(fine.k_proj(memory)),
                                                     split(fine.r_proj(memory)), fine.scale)  # (B, H, dh, T, S)
            spreads[scale] = _row_spread(logits)
    (v_std, v_ent), (n_std, n_ent), (o_std, o_ent) = spreads["vanilla"], spreads["per_dimension"], spreads["sqrt_head_dim"]
    assert 0.85 < n_std / v_std < 1.15 and abs(n_ent - v_ent) < 0.1
    assert o_std / v_std < 0.3 and o_ent > 2.95
    pinned = {"vanilla": (0.93627, 2.58498), "per_dimension": (0.93017, 2.59194), "sqrt_head_dim": (0.23254, 2.96597)}
    for name, (std, entropy) in pinned.items():
        assert spreads[name] == pytest.approx((std, entropy), abs=1e-4), (name, spreads)


def test_dimensions_attend_separately():
    """Untied dimensions really get different distributions (else fine2d would be vanilla)."""
    q, k, v, r = random_heads(2)
    scores = fine2d_functional.fine2d_scores(q, k, r)  # (B, H, dh, T, S)
    alpha = torch.softmax(scores, dim=-1)
    assert (alpha - alpha.mean(dim=2, keepdim=True)).abs().max() > 0.05
    _, probs = fine2d_attention(q, k, v, r, None, need_weights=True)
    assert_close_for(probs, alpha.mean(dim=2), ops=HAND_FORMULA_OPS)


# -- chunking, masks ------------------------------------------------------------------------
@pytest.mark.parametrize("rows", [1, 2, 4])
def test_chunked_equals_unchunked(rows):
    q, k, v, r = random_heads(3, t=7)
    b, h, t, dh = q.shape
    s = k.shape[2]
    pad = torch.tensor([[False] * s, [False, False, True, True]])
    for mask in (attention_mask(pad, t, s, False, q.device), attention_mask(None, t, s, True, q.device)):
        whole = fine2d_attention(q, k, v, r, mask, need_weights=True)
        budget = rows * b * h * dh * s
        assert target_chunk(b, h, s, dh, budget) == rows
        chunked = fine2d_attention_chunked(q, k, v, r, mask, need_weights=True, budget=budget)
        assert torch.equal(chunked[0], whole[0]) and torch.equal(chunked[1], whole[1])


def test_chunked_model_equals_unchunked_model(monkeypatch):
    model = model_for("all-sites")
    whole = model(SRC, TGT_IN, need_attention=True)
    monkeypatch.setattr(fine2d_functional, "CHUNK_ELEMENTS", 2 * 3 * 4 * 8 * 5)  # 2 target rows per chunk
    chunked = model(SRC, TGT_IN, need_attention=True)
    assert torch.equal(chunked.logits, whole.logits) and torch.equal(chunked.attention, whole.attention)


def test_all_padding_rows_give_zeros_not_nan():
    q, k, v, r = random_heads(4)
    pad = torch.tensor([[False, False, True, True], [True, True, True, True]])
    for tensor in (q, k, v, r):
        tensor.requires_grad_(True)
    context, probs = fine2d_attention(q, k, v, r, attention_mask(pad, q.shape[2], 4, False, q.device), need_weights=True)
    assert torch.equal(context[1], torch.zeros_like(context[1])) and torch.equal(probs[1], torch.zeros_like(probs[1]))
    assert probs[0, ..., 2:].abs().max() == 0.0
    assert_close_for(probs[0].sum(-1), torch.ones(3, 5), ops=TINY_MODEL_OPS)
    (context.sum() + probs.sum()).backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v, r))


def test_a_module_over_an_all_padding_memory_outputs_its_bias():
    torch.manual_seed(0)
    m = Fine2dAttention(16, 4, 0.0, "cross", {}).eval()
    x, memory = torch.randn(2, 3, 16), torch.randn(2, 4, 16)
    pad = torch.tensor([[False, True, True, True], [True] * 4])
    got = m(x, memory, key_padding_mask=pad, need_weights=True)
    out, probs = got.out, got.probs
    torch.testing.assert_close(out[1], m.out_proj.bias.expand(3, 16), atol=0, rtol=0)
    assert torch.equal(probs[1], torch.zeros_like(probs[1])) and torch.isfinite(out).all()
    state = m.init_state(memory, 2, memory.device, memory.dtype)
    stepped = m.step(x[:, :1], state, key_padding_mask=pad, need_weights=True)
    step_out, step_probs = stepped.out, stepped.probs
    assert_close_for(step_out, out[:, :1], ops=TINY_MODEL_OPS)
    assert_close_for(step_probs, probs[:, :, :1], ops=HAND_FORMULA_OPS)


# -- in the model -------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(CONFIGS))
def test_incremental_decoding_equals_full_pass(name):
    model = model_for(name)
    state = assert_incremental_equals_full_pass(model, SRC, TGT_IN)
    # The vanilla convention: the self-attention keys count the steps on dim 2.
    assert state.tensors["layers.0.self.k"].shape[2] == TGT_IN.shape[1]
    swapped = state.reorder(torch.tensor([2, 0, 1]))
    log_probs = model.decode_step(torch.tensor([20, 21, 22]), swapped).log_probs
    reference = model.decode_step(torch.tensor([21, 22, 20]), state).log_probs
    assert_close_for(log_probs, reference[[2, 0, 1]], ops=TINY_MODEL_OPS)


def test_state_names():
    model = model_for("cross")
    state = model.init_state(model.encode(SRC)).tensors
    assert sorted(n for n in state if n.startswith("layers.0.")) == [
        "layers.0.cross.k", "layers.0.cross.r", "layers.0.cross.v", "layers.0.self.k", "layers.0.self.v",
    ]
    no_key_term = model_for("cross-no-key-term")
    assert "layers.0.cross.r" not in no_key_term.init_state(no_key_term.encode(SRC)).tensors
    assert no_key_term.decoder_layers[0].cross_attention.r_proj is None


@pytest.mark.parametrize("name", ["cross", "all-sites", "cross+queryk-self"])
def test_cached_search_equals_uncached_search(name):
    model = model_for(name, seed=3)
    assert_cached_search_equals_uncached(model, SRC, max_length_offset=2)


@pytest.mark.parametrize("name", ["cross", "all-sites"])
def test_source_padding_changes_nothing(name):
    assert_padding_changes_nothing(model_for(name), SRC, TGT_IN)


def test_future_target_tokens_change_nothing():
    model = model_for("all-sites")
    changed = TGT_IN.clone()
    changed[:, 3:] = 20
    a, b = model(SRC, TGT_IN), model(SRC, changed)
    torch.testing.assert_close(a.logits[:, :3], b.logits[:, :3], atol=0, rtol=0)
    assert not torch.allclose(a.logits[:, 3:], b.logits[:, 3:])


def test_gradients_reach_every_parameter():
    model = tiny_model(**CONFIGS["all-sites"], attention_dropout=0.1).train()
    model(SRC, TGT_IN).logits.logsumexp(-1).sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert missing == []
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("src", [[7] * 69 + [2], [2], [7, 2]], ids=["70-tokens", "eos-only", "one-word"])
def test_long_and_one_token_sources_translate(src):
    model = model_for("cross+queryk-self", seed=2)
    options = DecodingOptions(beam_size=3, n_best=2, max_length_ratio=0.5, max_length_offset=4, alignment="token")
    (nbest,) = generate(model, torch.tensor([src]), options)
    assert len(nbest) == 2
    for h in nbest:
        assert math.isfinite(h.score) and len(h.tokens) <= math.ceil(0.5 * len(src)) + 4
        assert h.attention.shape == (len(h.tokens), len(src))
        assert_close_for(h.attention.sum(-1), torch.ones(len(h.tokens)), ops=TINY_MODEL_OPS)


# -- configuration --------------------------------------------------------------------------
def test_every_option_problem_is_reported_with_its_site():
    with pytest.raises(ConfigError) as caught:
        tiny_config(cross_attention=AttentionConfig("fine2d", {"key_term": "yes", "ngrams": [1, 2], "heads": 2}))
    assert caught.value.problems == [
        "cross: attention kind 'fine2d': unknown option(s) ['heads', 'ngrams']; known options: key_term, scale, score",
        "cross: attention kind 'fine2d': key_term must be true or false, got 'yes'",
    ]
    with pytest.raises(ConfigError) as caught:
        tiny_config(cross_attention=AttentionConfig("fine2d", {"scale": 0.5, "score": "dot"}))
    assert caught.value.problems == [
        "cross: attention kind 'fine2d': scale must be one of per_dimension, sqrt_head_dim, got 0.5",
        "cross: attention kind 'fine2d': score must be one of product, mlp, got 'dot'",
    ]
    with pytest.raises(ConfigError) as caught:
        tiny_config(cross_attention=AttentionConfig("fine2d", {"score": "mlp", "key_term": True, "scale": "per_dimension"}))
    assert caught.value.problems == [
        "cross: attention kind 'fine2d': key_term applies only to score 'product'",
        "cross: attention kind 'fine2d': scale applies only to score 'product'",
    ]


def test_fine2d_is_allowed_at_every_site():
    config = tiny_config(**CONFIGS["all-sites"])
    assert {config.attention(site).kind for site in ("encoder_self", "decoder_self", "cross")} == {"fine2d"}


def test_the_recipe_is_the_tiny_recipe_with_fine2d_cross_attention():
    from pathlib import Path

    from training.recipe import load_recipe

    recipes = Path(__file__).resolve().parents[2] / "recipes"
    recipe, tiny = load_recipe(recipes / "fine2d-cross-tiny-en-de.json"), load_recipe(recipes / "transformer-tiny-en-de.json")
    data, reference = recipe.to_dict(), tiny.to_dict()
    assert data["name"] == "fine2d-cross-tiny-en-de"
    assert {k: v for k, v in data.items() if k not in ("name", "model")} == {
        k: v for k, v in reference.items() if k not in ("name", "model")
    }
    assert {k: v for k, v in recipe.model.items() if k != "cross_attention"} == tiny.model
    config = recipe.model_config(10000)
    # The paper's score network f^d, named (model/attention/fine2d.py); key_term and scale are options
    # of the product score only.
    assert (config.cross_attention.kind, dict(config.cross_attention.options)) == ("fine2d", {"score": "mlp"})
    assert config.encoder_self_attention.kind == config.decoder_self_attention.kind == "vanilla"


# -- +C: the source word embeddings contextualised by the sentence (model/embedding.py) -------
def test_contextual_source_embeddings_by_hand():
    """d = 2: scaled embeddings e1 = (1, 0), e2 = (0, 2); W = diag(1, 0.5), b = (0, -1): tanh(W e + b)
    is (tanh 1, -tanh 1) and (0, 0), so c = (tanh 1, -tanh 1) / 2 over the two real words (the
    padding is left out) and every word is masked by σ(c) before its position is added."""
    from model.embedding import TokenEmbedding, sinusoidal_table

    embedding = TokenEmbedding(4, 2, 8, pad_id=0, dropout=0.0, contextual=True).eval()
    with torch.no_grad():
        embedding.tokens.weight.copy_(torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0], [0.0, 0.0]]) / math.sqrt(2))
        embedding.gate.proj.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 0.5]]))
        embedding.gate.proj.bias.copy_(torch.tensor([0.0, -1.0]))
    sigmoid = lambda v: 1 / (1 + math.exp(-v))  # noqa: E731
    gate = [sigmoid(math.tanh(1.0) / 2), sigmoid(-math.tanh(1.0) / 2)]
    positions = sinusoidal_table(8, 2)
    expected = torch.stack([torch.tensor([gate[0], 0.0]), torch.tensor([0.0, 2 * gate[1]]), torch.zeros(2)]) + positions[:3]
    out = embedding(torch.tensor([[1, 2, 0], [1, 2, 0]]))
    torch.testing.assert_close(out[0], expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(embedding(torch.tensor([[1, 2]]))[0], expected[:2], atol=1e-6, rtol=0)  # no padding: the same gate
    plain = TokenEmbedding(4, 2, 8, pad_id=0, dropout=0.0).eval()
    plain.tokens.weight.data.copy_(embedding.tokens.weight.data)
    assert not torch.allclose(plain(torch.tensor([[1, 2]])), expected[:2].unsqueeze(0), atol=1e-3)


CONTEXTUAL = dict(contextual_source_embeddings=True, cross_attention=AttentionConfig("fine2d", {"score": "mlp"}))


def test_contextual_model_incremental_decoding_equals_the_full_pass():
    model = tiny_model(seed=4, **CONTEXTUAL)
    assert model.source_embedding.gate is not None and model.target_embedding.gate is None
    assert_incremental_equals_full_pass(model, SRC, TGT_IN)
    assert_padding_changes_nothing(model, SRC, TGT_IN)


def test_contextual_gate_trains_and_changes_the_encoder_input():
    model = tiny_model(seed=5, **CONTEXTUAL).train()
    out = model(SRC, TGT_IN)
    out.logits.sum().backward()
    assert model.source_embedding.gate.proj.weight.grad.abs().sum() > 0
    plain = tiny_model(seed=5, cross_attention=AttentionConfig("fine2d", {"score": "mlp"}))
    assert "source_embedding.gate.proj.weight" not in dict(plain.named_parameters())


def test_the_contextual_recipe_is_the_fine2d_recipe_with_c():
    from pathlib import Path

    from training.recipe import load_recipe

    recipes = Path(__file__).resolve().parents[2] / "recipes"
    plain, contextual = (load_recipe(recipes / f"fine2d-cross{tail}-tiny-en-de.json").to_dict() for tail in ("", "-contextual"))
    assert contextual["model"] == {**plain["model"], "contextual_source_embeddings": True}
    assert {k: v for k, v in contextual.items() if k not in ("name", "model")} == {
        k: v for k, v in plain.items() if k not in ("name", "model")}
