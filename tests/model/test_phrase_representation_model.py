"""Phrase representations in the Transformer: incremental = full pass, cached search = uncached,
padding changes nothing, gradients reach every parameter, phrase attention over real chunks,
long and one-token sources translate, alone and with the other attention kinds."""
import math

import pytest
import torch
import torch.nn.functional as F

from model.attention.registry import attention_class, known_attention_kinds
from model.config import AttentionConfig
from model.decoding.generate import generate
from model.decoding.options import DecodingOptions
from model.alignments.attention_phrases import phrase_links
from tests.helpers import (assert_cached_search_equals_uncached, assert_incremental_equals_full_pass,
                           assert_padding_changes_nothing, chunk_spans, tiny_model)
from tests.helpers import HAND_FORMULA_OPS, TINY_MODEL_OPS, assert_close_for

SRC = torch.tensor([[5, 6, 7, 8, 9, 10, 11, 2], [9, 10, 11, 12, 2, 0, 0, 0], [11, 2, 0, 0, 0, 0, 0, 0]])
TGT_IN = torch.tensor([[1, 11, 12, 13, 14], [1, 15, 16, 0, 0], [1, 17, 0, 0, 0]])
HETEROGENEOUS = AttentionConfig("queryk", {"structure": "heterogeneous", "ngrams": [1, 2, 3]})

CASES = {
    "alone-mean": {"phrase_representation": {"glance": "mean"}},
    "alone-max": {"phrase_representation": {"glance": "max"}},
    # The ablation switches of Xu et al.'s table, and the Transformer adaptation (ReLU, residual decoder merge).
    "pool-mean": {"phrase_representation": {"pooling": "mean"}},
    "pool-max": {"phrase_representation": {"pooling": "max"}},
    "not-transparent": {"phrase_representation": {"transparent": False}},
    "adaptation": {"phrase_representation": {"glance": "mean", "activation": "relu", "decoder_combination": "residual"}},
    "queryk-self": {"phrase_representation": {}, "encoder_self_attention": HETEROGENEOUS,
                    "decoder_self_attention": HETEROGENEOUS},
    "queryk-cross": {"phrase_representation": {}, "cross_attention": HETEROGENEOUS},
    "convkv-interleaved-all": {"phrase_representation": {"glance": "max"}, **{
        f"{site}_attention": AttentionConfig("convkv", {"structure": "interleaved"})
        for site in ("encoder_self", "decoder_self", "cross")}},
    # The other model parts on the token cross-attention compose with the phrase sublayers.
    "alignment-biases": {"phrase_representation": {},
                         "alignment_biases": {"position": {}, "markov": {"window": 1, "form": "parallel"}, "fertility": {"window": 1, "form": "parallel"}}},
    "global-fertility": {"phrase_representation": {}, "global_fertility": {"weight": 0.1}},
}
# Every other registered kind (fine2d, ...) that runs with its default options, at the cross site.
for _kind in known_attention_kinds():
    if _kind not in ("vanilla", "convkv", "queryk") and not attention_class(_kind).validate_options({}, "cross"):
        CASES[f"{_kind}-cross"] = {"phrase_representation": {}, "cross_attention": AttentionConfig(_kind, {})}


def model_for(case, seed=0):
    return tiny_model(seed=seed, **CASES[case])


def phrasal_cross(case):
    return CASES[case].get("cross_attention", AttentionConfig()).kind in ("convkv", "queryk")


@pytest.mark.parametrize("case", list(CASES))
def test_incremental_decoding_equals_full_pass(case):
    model = model_for(case)
    memory = model.encode(SRC)
    state = model.init_state(memory)
    # Projected once per source: the phrase keys are in the state from the start, and never change.
    phrase_keys = {n: t for n, t in state.tensors.items() if ".phrase." in n}
    assert len(phrase_keys) == 2 * model.config.decoder_layers
    state = assert_incremental_equals_full_pass(model, SRC, TGT_IN, state)
    assert all(state.tensors[n] is t for n, t in phrase_keys.items())
    assert torch.equal(state.tensors["phrase_chunks"], memory.phrase_chunks)


@pytest.mark.parametrize("case", list(CASES))
def test_cached_search_equals_uncached_search(case):
    model = model_for(case, seed=3)
    assert_cached_search_equals_uncached(model, SRC, max_length_offset=2)


@pytest.mark.parametrize("case", list(CASES))
def test_a_sentence_alone_equals_it_padded_in_a_batch(case):
    batched, rows = assert_padding_changes_nothing(model_for(case), SRC, TGT_IN)
    for row, length, t_len, alone in rows:
        assert_close_for(batched.phrase_attention[row : row + 1, :t_len, :, :length], alone.phrase_attention, ops=TINY_MODEL_OPS)
        assert torch.equal(batched.phrase_chunks[row : row + 1, :length], alone.phrase_chunks)
        assert batched.phrase_attention[row, :, :, length:].abs().max().item() == 0.0


@pytest.mark.parametrize("options", [{"glance": "mean"}, {"glance": "max"}, {"pooling": "mean"}, {"pooling": "max"},
                                     {"transparent": False}, {"activation": "relu", "decoder_combination": "residual"}])
@pytest.mark.parametrize("case", ["alone-mean", "queryk-self", "queryk-cross"])
def test_gradients_reach_every_parameter(case, options):
    torch.manual_seed(0)
    model = tiny_model(**{**CASES[case], "phrase_representation": options}).train()
    out = model(SRC, TGT_IN)
    out.logits.logsumexp(-1).sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert missing == []
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


def test_phrase_attention_rows_are_distributions_over_the_real_chunks():
    model = model_for("alone-mean")
    out = model(SRC, TGT_IN, need_attention=True)
    assert chunk_spans(out.phrase_chunks) == [[(0, 3), (3, 6), (6, 8)], [(0, 3), (3, 5)], [(0, 2)]]
    table = out.phrase_attention  # (B, T, 8, S)
    assert_close_for(table.sum((2, 3)), torch.ones(3, 5), ops=TINY_MODEL_OPS)
    # Weight only at [n-1, j] for a chunk starting at j of real length n.
    allowed = torch.zeros(3, 8, SRC.shape[1], dtype=torch.bool)
    for b, row in enumerate(chunk_spans(out.phrase_chunks)):
        for start, end in row:
            allowed[b, end - start - 1, start] = True
    assert table.masked_select(~allowed.unsqueeze(1)).abs().max().item() == 0.0
    assert (table.masked_select(allowed.unsqueeze(1)) > 0).all()


def test_a_phrasal_cross_attention_reports_its_own_ngram_table():
    model = model_for("queryk-cross")
    out = model(SRC, TGT_IN, need_attention=True)
    assert out.phrase_attention.shape[2] == 3  # n-grams 1..3 of QueryK, not the 8 chunk sizes
    assert torch.equal(out.phrase_chunks, model_for("alone-mean")(SRC, TGT_IN).phrase_chunks)


def test_the_transparent_mix_of_a_decoder_layer_is_a_softmax_over_encoder_layers():
    model = model_for("alone-mean")
    phrase_attention = model.decoder_layers[1].phrase_attention
    with torch.no_grad():
        phrase_attention.mix_logits.copy_(torch.log(torch.tensor([1.0, 2.0, 5.0])))
    assert_close_for(phrase_attention.mix_weights(), torch.tensor([0.125, 0.25, 0.625]), ops=HAND_FORMULA_OPS)
    memory = model.encode(SRC)
    assert memory.phrase_representations.shape[1] == model.config.encoder_layers + 1
    expected = 0.125 * memory.phrase_representations[:, 0] + 0.25 * memory.phrase_representations[:, 1] + 0.625 * memory.phrase_representations[:, 2]
    assert_close_for(phrase_attention.mixed(memory.phrase_representations), expected, ops=TINY_MODEL_OPS)


def test_memory_and_state_reorder_follow_rows():
    model = model_for("queryk-self", seed=1)
    memory = model.encode(SRC)
    index = torch.tensor([2, 0, 1])
    moved = memory.reorder(index)
    assert torch.equal(moved.phrase_representations, memory.phrase_representations[index]) and torch.equal(moved.phrase_chunks, memory.phrase_chunks[index])
    state = model.init_state(memory)
    state = model.decode_step(TGT_IN[:, 0], state).state
    log_probs = model.decode_step(torch.tensor([20, 21, 22]), state.reorder(index)).log_probs
    reference = model.decode_step(torch.tensor([21, 22, 20]), state).log_probs
    assert_close_for(log_probs, reference[index], ops=TINY_MODEL_OPS)
    assert_close_for(model.init_state(moved).tensors["layers.0.phrase.k"], model.init_state(memory).tensors["layers.0.phrase.k"][index], ops=TINY_MODEL_OPS)


@pytest.mark.parametrize("case", ["alone-mean", "queryk-self"])
def test_a_long_and_a_one_token_source_translate(case):
    model = model_for(case, seed=2)
    torch.manual_seed(0)
    long = torch.cat([torch.randint(3, 500, (1, 69)), torch.tensor([[2]])], dim=1)  # 70 tokens
    options = DecodingOptions(beam_size=2, n_best=2, max_length_ratio=0.2, max_length_offset=3,
                            alignment="phrase", return_phrase_attention=True)
    alone = {}
    for src in (long, torch.tensor([[2]]), torch.tensor([[7, 2]])):
        (hypotheses,) = generate(model, src, options)
        spans = set(chunk_spans(model.encode(src).phrase_chunks)[0])
        assert len(hypotheses) == 2
        for h in hypotheses:
            assert h.tokens and torch.isfinite(torch.tensor(h.score))
            assert_close_for(h.phrase_attention.sum((1, 2)), torch.ones(len(h.tokens)), ops=TINY_MODEL_OPS)
            # model.alignments.attention_phrases reads the chunk table unchanged: every link is one of the chunks.
            assert {(link.start, link.start + link.length) for link in phrase_links(h.phrase_attention)} <= spans
        alone[src.shape[1]] = [h.tokens for h in hypotheses]
    assert chunk_spans(model.encode(long).phrase_chunks)[0][-1] == (64, 70)
    # Batched together, padded: the same translations.
    batch = torch.zeros(2, 70, dtype=torch.long)
    batch[0], batch[1, :2] = long[0], torch.tensor([7, 2])
    together = generate(model, batch, options)
    assert [h.tokens for h in together[0]] == alone[70] and [h.tokens for h in together[1]] == alone[2]


def _attention_by_hand(attention, h, keys, mask):
    """Multi-head scaled dot-product attention (Vaswani et al.) in plain tensor arithmetic."""
    b, t, d = h.shape
    heads = attention.n_heads
    def split(x, proj):  # (B, L, D) -> (B, H, L, dh)
        return (x @ proj.weight.T + proj.bias).view(b, -1, heads, d // heads).transpose(1, 2)
    q, k, v = split(h, attention.q_proj), split(keys, attention.k_proj), split(keys, attention.v_proj)
    scores = (q @ k.transpose(-1, -2) / math.sqrt(d // heads)).masked_fill(mask[:, None, None, :], float("-inf"))
    context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)  # (B, T, D)
    return context @ attention.out_proj.weight.T + attention.out_proj.bias


@pytest.mark.parametrize("case", ["alone-max", "not-transparent", "adaptation"])
def test_a_decoder_layers_phrase_sublayer_is_eq_7_and_8_in_plain_arithmetic(case):
    """Xu et al. §3.2 in every decoder layer: c = MultiHeadAttention(LN(x), mixed phrases) (eq. 7),
    update = W₄σ(W₃[LN(x) | c] + b₃) + b₄ with σ the sigmoid (eq. 8); the adaptation's update is c."""
    model = model_for(case, seed=5)
    with torch.no_grad():
        for p in model.parameters():  # LayerNorm gains and biases off their 1 / 0 start too
            p.add_(0.1 * torch.randn_like(p))
    sublayer = model.decoder_layers[1].phrase_attention
    memory = model.encode(SRC)
    x = torch.randn(3, 5, model.config.d_model)
    mask = memory.phrase_chunks.eq(0)
    got = sublayer(x, memory.phrase_representations, mask, need_weights=False).out
    h = F.layer_norm(x, (x.shape[-1],), sublayer.norm.weight, sublayer.norm.bias, sublayer.norm.eps)
    if case == "not-transparent":
        mixed = memory.phrase_representations[:, -1]  # the last encoder layer's phrases alone
    else:
        w = torch.exp(sublayer.mix_logits) / torch.exp(sublayer.mix_logits).sum()
        mixed = sum(w[k] * memory.phrase_representations[:, k] for k in range(memory.phrase_representations.shape[1]))
    context = _attention_by_hand(sublayer.attention, h, mixed, mask)  # eq. 7
    if case == "adaptation":
        expected = context
    else:
        w3, w4 = sublayer.merge.hidden, sublayer.merge.out
        expected = 1 / (1 + torch.exp(-(torch.cat([h, context], -1) @ w3.weight.T + w3.bias))) @ w4.weight.T + w4.bias
    assert_close_for(got, expected, ops=TINY_MODEL_OPS)


def test_the_encoder_combination_uses_the_sigmoid_by_default_and_relu_on_request():
    assert model_for("alone-max").encoder_layers[0].phrase_combination.merge.activation == "sigmoid"
    assert model_for("adaptation").encoder_layers[0].phrase_combination.merge.activation == "relu"
    assert model_for("alone-max").decoder_layers[0].phrase_attention.merge.activation == "sigmoid"
    assert model_for("adaptation").decoder_layers[0].phrase_attention.merge is None
    assert model_for("not-transparent").decoder_layers[0].phrase_attention.mix_logits is None
    assert model_for("pool-max").phrase_pooling[0].pooling == "max"
    assert not hasattr(model_for("pool-max").phrase_pooling[0], "score")  # no attention parameters


@pytest.mark.parametrize("case", ["alone-max", "adaptation"])
def test_the_encoder_combination_is_eq_7_and_8_in_plain_arithmetic(case):
    """Encoder layer 1: its tokens attend to layer 0's phrases (eq. 7), then W₄σ(W₃[LN(x) | c] + b₃) + b₄
    with σ the sigmoid (the paper) or ReLU (the adaptation) (eq. 8)."""
    model = model_for(case, seed=6)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    sublayer = model.encoder_layers[1].phrase_combination
    x, phrases = torch.randn(3, 8, model.config.d_model), torch.randn(3, 8, model.config.d_model)
    mask = model.encode(SRC).phrase_chunks.eq(0)  # (B, S) True where no chunk starts
    h = F.layer_norm(x, (x.shape[-1],), sublayer.norm.weight, sublayer.norm.bias, sublayer.norm.eps)
    context = _attention_by_hand(sublayer.attention, h, phrases, mask)  # eq. 7
    pre = torch.cat([h, context], -1) @ sublayer.merge.hidden.weight.T + sublayer.merge.hidden.bias
    hidden = 1 / (1 + torch.exp(-pre)) if case == "alone-max" else pre.clamp(min=0)
    expected = hidden @ sublayer.merge.out.weight.T + sublayer.merge.out.bias  # eq. 8
    assert_close_for(sublayer(x, phrases, mask), expected, ops=TINY_MODEL_OPS)
