"""Every phrasal kind x structure x site: incremental = full pass, cached search = uncached search,
padding and the future change nothing, gradients reach every parameter."""
import pytest
import torch

from model.config import AttentionConfig
from model.decoding.generate import generate
from model.decoding.options import DecodingOptions
from model.layers import has_phrase_attention
from tests.helpers import assert_cached_search_equals_uncached, assert_incremental_equals_full_pass, assert_padding_changes_nothing, tiny_model
from tests.helpers import TINY_MODEL_OPS, assert_close_for

SRC = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0], [11, 2, 0, 0, 0]])
TGT_IN = torch.tensor([[1, 11, 12, 13, 14], [1, 15, 16, 0, 0], [1, 17, 0, 0, 0]])

STRUCTURES = {
    "homogeneous-2+2": {"structure": "homogeneous", "ngrams": [1, 2], "heads_per_ngram": [2, 2]},
    "homogeneous-1-2-3": {"structure": "homogeneous", "ngrams": [1, 2, 3], "heads_per_ngram": [2, 1, 1]},
    "heterogeneous-1-2": {"structure": "heterogeneous", "ngrams": [1, 2]},
    "heterogeneous-1-2-3": {"structure": "heterogeneous", "ngrams": [1, 2, 3]},
    "interleaved": {"structure": "interleaved"},
    # The other edge rule of each (model/attention/ngram_options.py, option "edge").
    "homogeneous-1-2-3-inside": {"structure": "homogeneous", "ngrams": [1, 2, 3], "heads_per_ngram": [2, 1, 1], "edge": "inside"},
    "heterogeneous-1-2-3-padded": {"structure": "heterogeneous", "ngrams": [1, 2, 3], "edge": "padded"},
    "interleaved-padded": {"structure": "interleaved", "edge": "padded"},
}
SITES = ("encoder_self", "decoder_self", "cross")
CASES = [(kind, name, site) for kind in ("convkv", "queryk") for name in STRUCTURES for site in SITES]
IDS = [f"{kind}-{name}-{site}" for kind, name, site in CASES]


def model_for(kind, name, site, seed=0, **overrides):
    attention = AttentionConfig(kind, STRUCTURES[name])
    return tiny_model(seed=seed, **{f"{site}_attention": attention}, **overrides)


def all_sites_model(kind, name, seed=0):
    attention = AttentionConfig(kind, STRUCTURES[name])
    sites = {f"{site}_attention": attention for site in SITES}
    return tiny_model(seed=seed, **sites)


@pytest.mark.parametrize("kind,name,site", CASES, ids=IDS)
def test_incremental_decoding_equals_full_pass(kind, name, site):
    assert_incremental_equals_full_pass(model_for(kind, name, site), SRC, TGT_IN)


@pytest.mark.parametrize("kind,name,site", CASES, ids=IDS)
def test_cached_search_equals_uncached_search(kind, name, site):
    model = model_for(kind, name, site, seed=3)
    assert_cached_search_equals_uncached(model, SRC, max_length_offset=2)


@pytest.mark.parametrize("kind,name,site", CASES, ids=IDS)
def test_source_padding_changes_nothing(kind, name, site):
    batched, rows = assert_padding_changes_nothing(model_for(kind, name, site), SRC, TGT_IN)
    for row, length, _, _ in rows:
        # No weight on any n-gram touching padding.
        phrases = batched.phrase_attention[row]  # (T, n_max, S)
        for n in range(1, phrases.shape[1] + 1):
            assert phrases[:, n - 1, length - n + 1 :].abs().max().item() == 0.0


@pytest.mark.parametrize("kind,name,site", CASES, ids=IDS)
def test_future_target_tokens_change_nothing(kind, name, site):
    model = model_for(kind, name, site)
    changed = TGT_IN.clone()
    changed[:, 3:] = 20
    a = model(SRC, TGT_IN, need_attention=True)
    b = model(SRC, changed, need_attention=True)
    torch.testing.assert_close(a.logits[:, :3], b.logits[:, :3], atol=0, rtol=0)
    torch.testing.assert_close(a.phrase_attention[:, :3], b.phrase_attention[:, :3], atol=0, rtol=0)
    assert not torch.allclose(a.logits[:, 3:], b.logits[:, 3:])


@pytest.mark.parametrize("kind,name,site", CASES, ids=IDS)
def test_gradients_reach_every_parameter(kind, name, site):
    model = model_for(kind, name, site).train()
    model(SRC, TGT_IN).logits.logsumexp(-1).sum().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert missing == []
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("kind", ["convkv", "queryk"])
@pytest.mark.parametrize("name", list(STRUCTURES))
def test_every_site_phrasal_at_once(kind, name):
    """The recipe configuration: one kind at all three sites; incremental = full, reorder follows rows."""
    model = all_sites_model(kind, name, seed=1)
    state = assert_incremental_equals_full_pass(model, SRC, TGT_IN)
    swapped = state.reorder(torch.tensor([2, 0, 1]))
    log_probs = model.decode_step(torch.tensor([20, 21, 22]), swapped).log_probs
    reference = model.decode_step(torch.tensor([21, 22, 20]), state).log_probs
    assert_close_for(log_probs, reference[[2, 0, 1]], ops=TINY_MODEL_OPS)


@pytest.mark.parametrize("kind", ["convkv", "queryk"])
@pytest.mark.parametrize("name", ["homogeneous-1-2-3", "heterogeneous-1-2-3", "interleaved"])
def test_a_padded_sentence_translates_as_it_does_alone(kind, name):
    model = all_sites_model(kind, name, seed=4)
    options = DecodingOptions(beam_size=3, n_best=2, max_length_offset=3, alignment="phrase", return_phrase_attention=True)
    batched = generate(model, SRC, options)
    for row in range(SRC.shape[0]):
        length = int(SRC[row].ne(0).sum())
        alone = generate(model, SRC[row : row + 1, :length], options)[0]
        assert [h.tokens for h in alone] == [h.tokens for h in batched[row]]
        for a, b in zip(alone, batched[row]):
            assert_close_for(a.score, b.score, ops=TINY_MODEL_OPS)
            assert_close_for(b.phrase_attention[..., :length], a.phrase_attention, ops=TINY_MODEL_OPS)


def test_generate_returns_phrase_attention_that_matches_the_full_pass():
    model = all_sites_model("queryk", "heterogeneous-1-2-3", seed=5)
    options = DecodingOptions(beam_size=2, n_best=2, max_length_offset=3, alignment="phrase", return_phrase_attention=True)
    hypotheses = generate(model, SRC, options)
    for row, nbest in enumerate(hypotheses):
        for h in nbest:
            tgt_in = torch.tensor([[1] + h.tokens])
            full = model(SRC[row : row + 1], tgt_in, need_attention=True)
            assert_close_for(h.attention, full.attention[0, : len(h.tokens)], ops=TINY_MODEL_OPS)
            assert_close_for(h.phrase_attention, full.phrase_attention[0, : len(h.tokens)], ops=TINY_MODEL_OPS)
            # Each row is one distribution over source n-grams, and its token view over tokens.
            assert_close_for(h.phrase_attention.sum((1, 2)), torch.ones(len(h.tokens)), ops=TINY_MODEL_OPS)


def test_vanilla_reports_its_token_attention_as_unigram_phrases():
    model = tiny_model()
    assert not has_phrase_attention(model.decoder_layers[-1].cross_attention)
    full = model(SRC, TGT_IN, need_attention=True)
    assert torch.equal(full.phrase_attention, full.attention.unsqueeze(2))
    options = DecodingOptions(beam_size=2, max_length_offset=2, alignment="phrase", return_phrase_attention=True)
    for nbest in generate(model, SRC, options):
        assert torch.equal(nbest[0].phrase_attention, nbest[0].attention.unsqueeze(1))
