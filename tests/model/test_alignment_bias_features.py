"""The bias features by hand: the Markov window of the previous step's attention (edges, padding),
the fertility coverage as an explicit sum of earlier rows, the recurrence of the paper's form
over three steps, the position features, and the config errors, exactly."""
import math

import pytest
import torch

from model.biases.biased_cross_attention import BiasedCrossAttention
from model.biases.features import coverage, position_features, previous_step, window
from model.config import AttentionConfig
from model.errors import ConfigError
from tests.helpers import tiny_config, tiny_model
from tests.helpers import HAND_FORMULA_OPS, TINY_MODEL_OPS, assert_close_for

# Two sentences of real length 5 and 3 (two padding positions), four target rows.
MEMORY_PAD = torch.tensor([[False] * 5, [False, False, False, True, True]])


def test_window_of_the_previous_attention_by_hand():
    prev = torch.tensor([0.1, 0.2, 0.7, 0.0, 0.0])  # a 3-token sentence padded to 5: no weight on padding
    expected = torch.tensor([
        [0.0, 0.1, 0.2],  # i = 0: i-1 lies before the sentence
        [0.1, 0.2, 0.7],
        [0.2, 0.7, 0.0],  # i = 2, the last token: i+1 is padding
        [0.7, 0.0, 0.0],
        [0.0, 0.0, 0.0],
    ])
    assert torch.equal(window(prev, 1), expected)
    assert torch.equal(window(prev, 0), prev.unsqueeze(-1))


def test_previous_step_and_coverage_by_hand():
    probs = torch.tensor([[0.5, 0.5, 0.0], [0.25, 0.75, 0.0], [0.0, 0.0, 1.0]]).view(1, 1, 3, 3)  # (B, H, T, S)
    assert torch.equal(previous_step(probs)[0, 0], torch.tensor([[0.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.25, 0.75, 0.0]]))
    assert torch.equal(coverage(probs)[0, 0], torch.tensor([[0.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.75, 1.25, 0.0]]))


def test_position_features_by_hand():
    features = position_features(torch.tensor([[0, 1, 2]]), torch.tensor([2, 4]), 4)  # (B, T, S, 3)
    assert features.shape == (2, 3, 4, 3)
    for b, length in enumerate((2, 4)):
        for t in range(3):
            for i in range(4):
                expected = torch.tensor([math.log(1 + i), math.log(1 + t), math.log(1 + length)])
                assert_close_for(features[b, t, i], expected, ops=HAND_FORMULA_OPS)
    assert_close_for(features[1, 2, 3], [math.log(4), math.log(3), math.log(5)], ops=HAND_FORMULA_OPS)


def cross_attention(biases, seed=0):
    module = tiny_model(seed=seed, alignment_biases=biases).decoder_layers[0].cross_attention
    assert isinstance(module, BiasedCrossAttention)
    return module


def inputs(seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 4, 32, generator=generator)  # (B, T, D)
    memory = torch.randn(2, 5, 32, generator=generator)  # (B, S, D)
    return x, memory


def uniform_queries(module):
    """Zero query projection: every logit is 0, so the unbiased attention is 1/length on real tokens."""
    with torch.no_grad():
        module.inner.q_proj.weight.zero_()
        module.inner.q_proj.bias.zero_()


def test_markov_bias_on_a_constructed_case_exact_numbers():
    module = cross_attention({"markov": {"window": 1, "form": "parallel"}})
    uniform_queries(module)
    a, b, c = 0.3, 0.6, 0.9  # weights of offsets -1, 0, +1 (every head)
    with torch.no_grad():
        module.biases["markov"].weight.copy_(torch.tensor([a, b, c]).expand(4, 3))
    x, memory = inputs()
    probs = module(x, memory, key_padding_mask=MEMORY_PAD, need_weights=True).probs  # (B, H, T, S)
    # t = 0: nothing was attended before, no bias, uniform.
    assert_close_for(probs[0, :, 0], torch.full((4, 5), 0.2), ops=HAND_FORMULA_OPS)
    assert_close_for(probs[1, :, 0], torch.tensor([1 / 3] * 3 + [0.0] * 2).expand(4, 5), ops=HAND_FORMULA_OPS)
    # t >= 1: the previous unbiased row is 1/len on the sentence; outside it (before i=0, on the padding) 0.
    long_bias = torch.tensor([b + c, a + b + c, a + b + c, a + b + c, a + b]) / 5
    short_bias = torch.tensor([b + c, a + b + c, a + b]) / 3  # [0.5, 0.6, 0.3]
    assert_close_for(short_bias, [0.5, 0.6, 0.3], ops=HAND_FORMULA_OPS)
    for t in (1, 2, 3):
        assert_close_for(probs[0, :, t], torch.softmax(long_bias, 0).expand(4, 5), ops=TINY_MODEL_OPS)
        short = torch.cat([torch.softmax(short_bias, 0), torch.zeros(2)])
        assert_close_for(probs[1, :, t], short.expand(4, 5), ops=TINY_MODEL_OPS)


def test_fertility_bias_on_a_constructed_case_exact_numbers():
    module = cross_attention({"fertility": {"window": 1, "form": "parallel"}})
    uniform_queries(module)
    with torch.no_grad():
        module.biases["fertility"].weight.copy_(torch.tensor([0.3, 0.6, 0.9]).expand(4, 3))
    x, memory = inputs()
    probs = module(x, memory, key_padding_mask=MEMORY_PAD, need_weights=True).probs
    # After t uniform rows the coverage is t/len on every real token and 0 outside the sentence,
    # so the bias is t times the Markov case's: t·[0.5, 0.6, 0.3] on the 3-token sentence.
    for t in range(4):
        short = torch.cat([torch.softmax(t * torch.tensor([0.5, 0.6, 0.3]), 0), torch.zeros(2)])
        assert_close_for(probs[1, :, t], short.expand(4, 5), ops=TINY_MODEL_OPS)
        long = torch.softmax(t * torch.tensor([1.5, 1.8, 1.8, 1.8, 0.9]) / 5, 0)
        assert_close_for(probs[0, :, t], long.expand(4, 5), ops=TINY_MODEL_OPS)


def softmax_list(values):
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    return [e / sum(exps) for e in exps]


def window_sum(weights, signal, i):
    """Σ_o w[o] · signal[i+o], o = -k..k, nothing outside the sentence (Cohn et al. §3.2, ξ)."""
    k = (len(weights) - 1) // 2
    return sum(w * signal[i + o] for o, w in zip(range(-k, k + 1), weights) if 0 <= i + o < len(signal))


def hand_recurrence(length, steps, markov, fertility):
    """Cohn et al. §3.2–§3.3 with all content logits 0: α_t = softmax(ξ₁(α_{t-1}) + ξ₂(Σ_{t'<t} α_{t'})),
    every α the biased row actually used, in plain Python lists."""
    rows = []
    for t in range(steps):
        previous = rows[-1] if rows else [0.0] * length
        covered = [sum(row[i] for row in rows) for i in range(length)]
        rows.append(softmax_list([window_sum(markov, previous, i) + window_sum(fertility, covered, i)
                                  for i in range(length)]))
    return rows


RECURRENT = {"markov": {"window": 1, "form": "recurrent"}, "fertility": {"window": 1, "form": "recurrent"}}
MARKOV_W, FERTILITY_W = [0.3, 0.6, 0.9], [-1.0, -2.0, 0.5]


def test_recurrent_form_feeds_the_biased_rows_forward_by_hand():
    module = cross_attention(RECURRENT)
    uniform_queries(module)
    with torch.no_grad():
        module.biases["markov"].weight.copy_(torch.tensor(MARKOV_W).expand(4, 3))
        module.biases["fertility"].weight.copy_(torch.tensor(FERTILITY_W).expand(4, 3))
    x, memory = inputs()
    probs = module(x, memory, key_padding_mask=MEMORY_PAD, need_weights=True).probs  # (B, H, T, S)
    short = hand_recurrence(3, 4, MARKOV_W, FERTILITY_W)
    # Step 1 by hand: α_0 = 1/3 everywhere; Markov [0.6+0.9, 0.3+0.6+0.9, 0.3+0.6]/3 = [0.5, 0.6, 0.3];
    # fertility [-2+0.5, -1-2+0.5, -1-2]/3 = [-0.5, -2.5/3, -1]; α_1 = softmax of the sum.
    assert_close_for(short[1], torch.softmax(torch.tensor([0.0, 0.6 - 2.5 / 3, -0.7], dtype=torch.float64), 0), ops=HAND_FORMULA_OPS)
    for t in range(4):
        row = torch.tensor(short[t] + [0.0, 0.0]).expand(4, 5)
        assert_close_for(probs[1, :, t], row, ops=TINY_MODEL_OPS)
        assert_close_for(probs[0, :, t], torch.tensor(hand_recurrence(5, 4, MARKOV_W, FERTILITY_W)[t]).expand(4, 5), ops=TINY_MODEL_OPS)
    # Step 2 reads the BIASED α_1, not the uniform unbiased one: the parallel form gives another row.
    parallel = cross_attention({name: {"window": 1, "form": "parallel"} for name in RECURRENT})
    parallel.load_state_dict(module.state_dict())
    unbiased_history = parallel(x, memory, key_padding_mask=MEMORY_PAD, need_weights=True).probs
    assert (unbiased_history[1, 0, 2, :3] - probs[1, 0, 2, :3]).abs().max() > 1e-2


def test_recurrent_decoding_carries_the_biased_row():
    """After each step the state holds the biased row it attended with and the sum of those rows."""
    module = cross_attention(RECURRENT)
    uniform_queries(module)
    with torch.no_grad():
        module.biases["markov"].weight.copy_(torch.tensor(MARKOV_W).expand(4, 3))
        module.biases["fertility"].weight.copy_(torch.tensor(FERTILITY_W).expand(4, 3))
    x, memory = inputs()
    state = module.init_state(memory, 2, memory.device, memory.dtype)
    short = hand_recurrence(3, 3, MARKOV_W, FERTILITY_W)
    for t in range(3):
        out = module.step(x[:, t : t + 1], state, key_padding_mask=MEMORY_PAD, need_weights=True)
        state = out.state
        assert_close_for(state["prev_attention"][1], torch.tensor(short[t] + [0.0, 0.0]).expand(4, 5), ops=TINY_MODEL_OPS)
        covered = [sum(row[i] for row in short[: t + 1]) for i in range(3)] + [0.0, 0.0]
        assert_close_for(state["coverage"][1], torch.tensor(covered).expand(4, 5), ops=TINY_MODEL_OPS)


def reference_probs(module, x, memory, pad, bias_of):
    """The biased attention by explicit loops: bias_of(unbiased (H, T, S_real) of one sentence, h, t, i)."""
    with torch.no_grad():
        return _reference_probs(module, x, memory, pad, bias_of)


def _reference_probs(module, x, memory, pad, bias_of):
    kv = module.inner.init_state(memory, 2, memory.device, memory.dtype)
    logits = module.inner.token_logits(x, kv)  # (B, H, T, S)
    out = torch.zeros_like(logits)
    for row in range(2):
        length = int((~pad[row]).sum())
        unbiased = torch.softmax(logits[row, :, :, :length], dim=-1)  # (H, T, S_real)
        for h in range(logits.shape[1]):
            for t in range(logits.shape[2]):
                bias = torch.tensor([bias_of(unbiased, h, t, i) for i in range(length)])
                out[row, h, t, :length] = torch.softmax(logits[row, h, t, :length] + bias, dim=-1)
    return out


@pytest.mark.parametrize("window_size", [0, 1, 2])
def test_markov_bias_reads_the_previous_steps_unbiased_attention(window_size):
    module = cross_attention({"markov": {"window": window_size, "form": "parallel"}}, seed=1)
    with torch.no_grad():
        module.biases["markov"].weight.normal_(generator=torch.Generator().manual_seed(3))
    weight = module.biases["markov"].weight.detach()  # (H, 2k+1)
    x, memory = inputs(1)

    def markov(unbiased, h, t, i):
        length = unbiased.shape[-1]
        return sum(
            float(weight[h, o + window_size]) * float(unbiased[h, t - 1, i + o])
            for o in range(-window_size, window_size + 1)
            if t > 0 and 0 <= i + o < length
        )

    probs = module(x, memory, key_padding_mask=MEMORY_PAD, need_weights=True).probs
    assert_close_for(probs, reference_probs(module, x, memory, MEMORY_PAD, markov), ops=TINY_MODEL_OPS)


def test_fertility_bias_is_the_sum_of_all_earlier_rows():
    module = cross_attention({"fertility": {"window": 1, "form": "parallel"}}, seed=2)
    with torch.no_grad():
        module.biases["fertility"].weight.normal_(generator=torch.Generator().manual_seed(4))
    weight = module.biases["fertility"].weight.detach()
    x, memory = inputs(2)

    def fertility(unbiased, h, t, i):
        length = unbiased.shape[-1]
        covered = [sum(float(unbiased[h, earlier, j]) for earlier in range(t)) for j in range(length)]
        return sum(float(weight[h, o + 1]) * covered[i + o] for o in (-1, 0, 1) if 0 <= i + o < length)

    probs = module(x, memory, key_padding_mask=MEMORY_PAD, need_weights=True).probs
    assert_close_for(probs, reference_probs(module, x, memory, MEMORY_PAD, fertility), ops=TINY_MODEL_OPS)


def test_position_bias_is_the_small_map_of_the_hand_features():
    module = cross_attention({"position": {"hidden": 5}}, seed=3)
    term = module.biases["position"]
    x, memory = inputs(3)

    def position(unbiased, h, t, i):
        length = unbiased.shape[-1]
        psi = torch.tensor([math.log(1 + i), math.log(1 + t), math.log(1 + length)])
        hidden = torch.tanh(term.hidden.weight @ psi + term.hidden.bias)  # (5,)
        return float(term.out.weight[h] @ hidden + term.out.bias[h])

    probs = module(x, memory, key_padding_mask=MEMORY_PAD, need_weights=True).probs
    assert_close_for(probs, reference_probs(module, x, memory, MEMORY_PAD, position), ops=TINY_MODEL_OPS)


def test_the_inner_protocol_reproduces_vanilla_attention():
    """token_logits + mask + softmax + mix is exactly what VanillaAttention.forward computes."""
    inner = cross_attention({"markov": {"form": "parallel"}}).inner
    x, memory = inputs(4)
    got = inner(x, memory, key_padding_mask=MEMORY_PAD, need_weights=True)
    out, probs = got.out, got.probs
    kv = inner.init_state(memory, 2, memory.device, memory.dtype)
    logits = inner.token_logits(x, kv).masked_fill(MEMORY_PAD.view(2, 1, 1, 5), float("-inf"))
    mine = torch.softmax(logits, dim=-1)
    assert torch.equal(mine, probs)
    assert torch.equal(inner.mix(mine, kv), out)


PHRASAL = {"structure": "heterogeneous", "ngrams": [1, 2]}


@pytest.mark.parametrize(
    "biases,cross,problems",
    [
        (
            {"posit": {}, "markov": {"window": -1, "width": 2}, "fertility": [1], "position": {"hidden": 0}},
            AttentionConfig(),
            [
                "alignment_biases: unknown bias 'posit'; known biases: fertility, markov, position",
                "alignment_biases.markov: unknown option(s) ['width']; known options: form, window",
                "alignment_biases.markov.window must be a non-negative integer, got -1",
                "alignment_biases.fertility must be an object of options, got list",
                "alignment_biases.position.hidden must be a positive integer, got 0",
            ],
        ),
        (
            {"fertility": {"window": 1.5}, "position": {"size": 3}},
            AttentionConfig(),
            [
                "alignment_biases.fertility.window must be a non-negative integer, got 1.5",
                "alignment_biases.position: unknown option(s) ['size']; known options: hidden",
            ],
        ),
        (
            {"markov": {"window": True}},
            AttentionConfig("queryk", PHRASAL),
            [
                "alignment_biases.markov.window must be a non-negative integer, got True",
                "alignment biases need token-level cross-attention logits; cross_attention kind 'queryk' scores n-grams",
            ],
        ),
        (
            {"markov": {}},
            AttentionConfig("convkv", PHRASAL),
            ["alignment biases need token-level cross-attention logits; cross_attention kind 'convkv' scores n-grams"],
        ),
        ([["markov", {}]], AttentionConfig(), ["alignment_biases must be an object, got list"]),
        (
            {"markov": {"form": "recurent"}, "fertility": {"form": None}},
            AttentionConfig(),
            [
                "alignment_biases.markov.form must be one of parallel, recurrent, got 'recurent'",
                "alignment_biases.fertility.form must be one of parallel, recurrent, got None",
            ],
        ),
        (
            {"markov": {"form": "parallel"}, "fertility": {}, "position": {}},
            AttentionConfig(),
            ["alignment_biases: fertility and markov must have the same form (the layer runs step by step or not), "
             "got fertility 'recurrent', markov 'parallel'"],
        ),
    ],
    ids=["names-and-options", "option-types", "queryk-cross", "convkv-cross", "not-an-object", "forms",
         "mixed-forms"],
)
def test_config_errors_are_exact(biases, cross, problems):
    with pytest.raises(ConfigError) as error:
        tiny_config(alignment_biases=biases, cross_attention=cross)
    assert error.value.problems == problems


def test_valid_options_and_phrasal_self_attention_are_accepted():
    phrasal = AttentionConfig("queryk", {"structure": "heterogeneous", "ngrams": [1, 2, 3]})
    config = tiny_config(alignment_biases={"position": {"hidden": 4}, "markov": {"window": 0}, "fertility": {}},
                         encoder_self_attention=phrasal, decoder_self_attention=phrasal)
    assert config.to_dict()["alignment_biases"] == {"position": {"hidden": 4}, "markov": {"window": 0}, "fertility": {}}
    assert tiny_config(alignment_biases={}).alignment_biases == {}


def test_the_one_masked_softmax_hides_true_entries_and_zeroes_empty_rows():
    """The biases use the same masked softmax as the n-gram attention: True = hidden, as key_padding_mask."""
    from model.attention.functional import masked_softmax
    from model.biases.biased_cross_attention import padding

    logits = torch.tensor([[0.0, math.log(3.0), 5.0], [1.0, 2.0, 3.0]]).view(2, 1, 1, 3)
    pad = torch.tensor([[False, False, True], [True, True, True]])
    probs = masked_softmax(logits, padding(pad), may_be_empty=True).view(2, 3)
    assert_close_for(probs, torch.tensor([[0.25, 0.75, 0.0], [0.0, 0.0, 0.0]]), ops=HAND_FORMULA_OPS)
    assert probs[0, 2].item() == 0.0


@pytest.mark.parametrize("given, recurrent", [({}, True), ({"form": "recurrent"}, True), ({"form": "parallel"}, False)])
def test_an_omitted_form_is_the_papers_recurrent_form(given, recurrent):
    """Cohn et al.'s form is the default: the layer runs its softmax step by step unless "parallel" is named,
    and a config that leaves the form out computes what one naming "recurrent" computes, bit for bit."""
    biases = {"position": {}, "markov": {"window": 1, **given}, "fertility": {"window": 1, **given}}
    module = cross_attention(biases, seed=3).eval()
    assert module.recurrent is recurrent
    named = cross_attention({name: {**options, "form": "recurrent" if recurrent else "parallel"}
                             for name, options in biases.items() if name != "position"} | {"position": {}}, seed=3).eval()
    with torch.no_grad():  # random bias weights (they start at zero, which would hide the form)
        for mine, theirs in zip(module.parameters(), named.parameters()):
            mine.copy_(torch.randn_like(mine))
            theirs.copy_(mine)
    x, memory = inputs(1)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    assert torch.equal(module(x, memory, key_padding_mask=pad).out, named(x, memory, key_padding_mask=pad).out)


def test_position_alone_has_no_recurrence_to_run():
    assert cross_attention({"position": {}}).recurrent is False
