"""Structural alignment biases in the whole model, in both forms (recurrent: the paper's, parallel):
incremental = full pass for every bias alone and combined (also with phrasal self-attention),
cached search = uncached search, the bias state reorders with the beam, padding and the future
change nothing, gradients reach every parameter."""
import pytest
import torch

from model.biases.biased_cross_attention import BiasedCrossAttention
from model.config import AttentionConfig
from model.decoding.generate import generate
from model.decoding.options import DecodingOptions
from tests.helpers import (
    assert_cached_search_equals_uncached,
    assert_incremental_equals_full_pass,
    assert_padding_changes_nothing,
    randomise_biases,
    tiny_model,
)
from tests.helpers import TINY_MODEL_OPS, assert_close_for

SRC = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0], [11, 2, 0, 0, 0]])
TGT_IN = torch.tensor([[1, 11, 12, 13, 14], [1, 15, 16, 0, 0], [1, 17, 0, 0, 0]])

ALL = {"position": {}, "markov": {"window": 1, "form": "parallel"}, "fertility": {"window": 1, "form": "parallel"}}
RECURRENT = {"position": {}, "markov": {"window": 1, "form": "recurrent"}, "fertility": {"window": 1, "form": "recurrent"}}
BIASES = {
    "position": {"position": {}},
    "markov": {"markov": {"window": 1, "form": "parallel"}},
    "markov-window-0": {"markov": {"window": 0, "form": "parallel"}},
    "fertility": {"fertility": {"window": 1, "form": "parallel"}},
    "fertility-window-2": {"fertility": {"window": 2, "form": "parallel"}},
    "all": ALL,
    "markov-recurrent": {"markov": {"window": 1, "form": "recurrent"}},
    "fertility-recurrent": {"fertility": {"window": 2, "form": "recurrent"}},
    "all-recurrent": RECURRENT,
    "all-parallel": {"position": {}, "markov": {"form": "parallel"}, "fertility": {"form": "parallel"}},
}
QUERYK_SELF = AttentionConfig("queryk", {"structure": "heterogeneous", "ngrams": [1, 2, 3]})


def biased_model(biases, seed=0, **overrides):
    """A tiny model whose bias weights are random (they start at zero), so that every term matters."""
    return randomise_biases(tiny_model(seed=seed, alignment_biases=biases, **overrides), seed)


@pytest.mark.parametrize("name", list(BIASES))
def test_incremental_decoding_equals_full_pass(name):
    model = biased_model(BIASES[name])
    state = assert_incremental_equals_full_pass(model, SRC, TGT_IN)
    expected = {"position": {"step"}, "markov": {"prev_attention"}, "fertility": {"coverage"}}
    keys = set().union(*(expected[bias] for bias in BIASES[name]))
    for index in range(model.config.decoder_layers):
        assert {n.split(".")[-1] for n in state.tensors if n.startswith(f"layers.{index}.cross.")} == {"k", "v"} | keys
    if "position" in BIASES[name]:
        assert state.tensors["layers.0.cross.step"].tolist() == [5, 5, 5]


def test_biases_change_the_attention_and_the_plain_model_has_none():
    plain, biased = tiny_model(), biased_model(ALL)
    assert not any(isinstance(m, BiasedCrossAttention) for m in plain.modules())
    assert not any("prev_attention" in n for n in plain.init_state(plain.encode(SRC)).tensors)
    # Same seed, same inner weights: only the bias terms differ.
    difference = (plain(SRC, TGT_IN, need_attention=True).attention - biased(SRC, TGT_IN, need_attention=True).attention)
    assert difference.abs().max() > 1e-2


@pytest.mark.parametrize("name", ["markov", "all", "all-recurrent"])
def test_with_heterogeneous_queryk_self_attention(name):
    model = biased_model(BIASES[name], seed=2, encoder_self_attention=QUERYK_SELF, decoder_self_attention=QUERYK_SELF)
    assert_incremental_equals_full_pass(model, SRC, TGT_IN)


@pytest.mark.parametrize("biases", [ALL, RECURRENT], ids=["parallel", "recurrent"])
def test_with_phrase_representations(biases):
    """The biases sit on the token cross-attention; the phrase cross-attention (Xu et al.) is untouched."""
    model = biased_model(biases, seed=4, phrase_representation={"glance": "mean"})
    assert_incremental_equals_full_pass(model, SRC, TGT_IN)


@pytest.mark.parametrize("name", ["markov", "fertility", "all", "markov-recurrent", "all-recurrent"])
def test_cached_search_equals_uncached_search(name):
    """The bias state (previous attention, coverage, step) reorders with the beam: a wrong parent
    would change the scores of the cached search but not of the uncached one."""
    model = biased_model(BIASES[name], seed=3)
    assert_cached_search_equals_uncached(model, SRC, max_length_offset=3)


@pytest.mark.parametrize("biases", [ALL, RECURRENT], ids=["parallel", "recurrent"])
def test_bias_state_reorders_with_its_rows(biases):
    model = biased_model(biases, seed=1, encoder_self_attention=QUERYK_SELF, decoder_self_attention=QUERYK_SELF)
    state = model.init_state(model.encode(SRC))
    for t in range(3):
        state = model.decode_step(TGT_IN[:, t], state).state
    swapped = state.reorder(torch.tensor([2, 0, 1]))
    step = model.decode_step(torch.tensor([20, 21, 22]), swapped)
    log_probs, attention = step.log_probs, step.attention
    reference_step = model.decode_step(torch.tensor([21, 22, 20]), state)
    reference, reference_attention = reference_step.log_probs, reference_step.attention
    assert_close_for(log_probs, reference[[2, 0, 1]], ops=TINY_MODEL_OPS)
    assert_close_for(attention, reference_attention[[2, 0, 1]], ops=TINY_MODEL_OPS)


@pytest.mark.parametrize("name", ["position", "markov", "fertility", "all", "all-recurrent"])
def test_source_padding_changes_nothing(name):
    assert_padding_changes_nothing(biased_model(BIASES[name]), SRC, TGT_IN)


@pytest.mark.parametrize("biases", [ALL, RECURRENT], ids=["parallel", "recurrent"])
def test_future_target_tokens_change_nothing(biases):
    model = biased_model(biases)
    changed = TGT_IN.clone()
    changed[:, 3:] = 20
    a = model(SRC, TGT_IN, need_attention=True)
    b = model(SRC, changed, need_attention=True)
    torch.testing.assert_close(a.logits[:, :3], b.logits[:, :3], atol=0, rtol=0)
    torch.testing.assert_close(a.attention[:, :3], b.attention[:, :3], atol=0, rtol=0)
    assert not torch.allclose(a.logits[:, 3:], b.logits[:, 3:])


@pytest.mark.parametrize("biases", [ALL, RECURRENT], ids=["parallel", "recurrent"])
@pytest.mark.parametrize("randomized", [False, True], ids=["as-initialised", "random-bias-weights"])
def test_gradients_reach_every_parameter(randomized, biases):
    model = (biased_model(biases) if randomized else tiny_model(alignment_biases=biases)).train()
    model(SRC, TGT_IN).logits.logsumexp(-1).sum().backward()
    names = [n for n, _ in model.named_parameters()]
    assert sum(".biases." in n for n in names) == 2 * 6  # per layer: position 4, markov 1, fertility 1
    missing = [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert missing == []
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


@pytest.mark.parametrize("source", [[2], [7, 2], list(range(10, 80)) + [2]], ids=["eos-only", "one-token", "70-tokens"])
@pytest.mark.parametrize("biases", [ALL, RECURRENT], ids=["parallel", "recurrent"])
def test_generate_agrees_with_the_full_pass(source, biases):
    model = biased_model(biases, seed=6)
    src = torch.tensor([source])
    options = DecodingOptions(beam_size=3, n_best=2, max_length_ratio=1.0, max_length_offset=4, alignment="token")
    hypotheses = generate(model, src, options)[0]
    assert len(hypotheses) == 2
    for h in hypotheses:
        assert len(h.tokens) <= len(source) + 4  # ceil(1.0 * S) + 4
        tgt_in = torch.tensor([[1] + h.tokens])  # (1, L+1): the last row predicts EOS
        full = model(src, tgt_in, need_attention=True)
        log_probs = torch.log_softmax(full.logits[0].float(), -1)  # (L+1, V)
        picked = log_probs[torch.arange(len(h.tokens) + 1), torch.tensor(h.tokens + [2])].sum().item()
        assert_close_for(picked, h.log_prob, ops=TINY_MODEL_OPS)
        assert_close_for(h.attention, full.attention[0, : len(h.tokens)], ops=TINY_MODEL_OPS)
        assert_close_for(h.attention.sum(-1), torch.ones(len(h.tokens)), ops=TINY_MODEL_OPS)


def test_the_phrase_view_of_a_biased_model_is_its_token_attention():
    model = biased_model(ALL, seed=7)
    full = model(SRC, TGT_IN, need_attention=True)
    assert torch.equal(full.phrase_attention, full.attention.unsqueeze(2))
    options = DecodingOptions(beam_size=2, max_length_offset=2, alignment="phrase", return_phrase_attention=True)
    for nbest in generate(model, SRC, options):
        assert torch.equal(nbest[0].phrase_attention, nbest[0].attention.unsqueeze(1))


def test_the_two_forms_differ_once_a_bias_is_learned_and_agree_before():
    """With zero bias weights (a fresh model) biased and unbiased attention coincide, so the forms give
    the same numbers; with learned weights the recurrent form reads the biased rows and differs."""
    fresh = tiny_model(alignment_biases=RECURRENT)(SRC, TGT_IN, need_attention=True).attention
    assert_close_for(fresh, tiny_model(alignment_biases=ALL)(SRC, TGT_IN, need_attention=True).attention, ops=TINY_MODEL_OPS)
    recurrent = biased_model(RECURRENT)(SRC, TGT_IN, need_attention=True).attention  # (B, T, S)
    parallel = biased_model(ALL)(SRC, TGT_IN, need_attention=True).attention
    # Row 0 reads no earlier row; row 1 reads row 0, which the position term biases already.
    assert_close_for(recurrent[:, 0], parallel[:, 0], ops=TINY_MODEL_OPS)
    assert (recurrent[:, 1:] - parallel[:, 1:]).abs().max() > 1e-3
