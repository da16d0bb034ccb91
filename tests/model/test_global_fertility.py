"""The global fertility head: options checked as a whole, the configured attention returned, gradients reach the head."""
import math

import pytest
import torch

from model.model_dir import load_model_dir, save_model_dir
from model.config import ModelConfig
from model.errors import ConfigError
from tests.helpers import tiny_config, tiny_model
from training.losses import global_fertility_loss
from tests.helpers import TINY_MODEL_OPS, assert_close_for

SRC = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])  # (2, 5): x + [EOS], padded
TGT_IN = torch.tensor([[1, 11, 12, 13], [1, 14, 0, 0]])  # (2, 4): [BOS] + y, padded
TGT_OUT = torch.tensor([[11, 12, 13, 2], [14, 2, 0, 0]])  # (2, 4): y + [EOS], padded


pytestmark = pytest.mark.usefixtures("one_thread")


def problems(options, **config):
    with pytest.raises(ConfigError) as caught:
        ModelConfig.from_dict({"vocab_size": 100, "d_model": 32, "n_heads": 4, "decoder_layers": 3,
                               "global_fertility": options, **config})
    return caught.value.problems


def test_every_option_problem_is_reported_at_once():
    assert problems({"weight": -0.5, "layer": 3, "head": 4, "min_variance": 0, "colour": "red",
                     "reduction": "total"}) == [
        "global_fertility: unknown option(s) ['colour']; known options: head, layer, min_variance, reduction, weight",
        "global_fertility: weight must be a number >= 0, got -0.5",
        "global_fertility: layer must index a decoder layer in [-3, 3), got 3",
        "global_fertility: head must be null (heads averaged) or a head index in [0, 4), got 4",
        "global_fertility: min_variance must be a number > 0, got 0",
        "global_fertility: reduction must be one of mean, sum, got 'total'",
    ]
    assert problems({"layer": -4, "head": True}) == [
        "global_fertility: option 'weight' is required (the loss coefficient, a number >= 0)",
        "global_fertility: layer must index a decoder layer in [-3, 3), got -4",
        "global_fertility: head must be null (heads averaged) or a head index in [0, 4), got True",
    ]
    assert problems({"weight": "0.1"}) == ["global_fertility: weight must be a number >= 0, got '0.1'"]
    assert problems([0.1]) == ["global_fertility must be an object or null, got list"]


def test_valid_options_round_trip():
    config = ModelConfig.from_dict({"vocab_size": 100, "d_model": 32, "n_heads": 4, "decoder_layers": 3,
                                    "global_fertility": {"weight": 0, "layer": -3, "head": 3, "min_variance": 1e-4,
                                                         "reduction": "sum"}})
    assert ModelConfig.from_dict(config.to_dict()) == config


def capture_cross_attention(model, index):
    seen = {}

    def hook(module, inputs, output):
        seen["probs"] = output.probs

    handle = model.decoder_layers[index].cross_attention.register_forward_hook(hook)
    return seen, handle


@pytest.mark.parametrize("layer, head", [(-1, None), (0, None), (0, 2)])
def test_forward_returns_the_configured_layers_attention(layer, head):
    model = tiny_model(global_fertility={"weight": 0.1, "layer": layer, "head": head})
    seen, handle = capture_cross_attention(model, layer % 2)
    out = model(SRC, TGT_IN)
    handle.remove()
    probs = seen["probs"]  # (B, H, T, S)
    expected = probs.mean(dim=1) if head is None else probs[:, head]
    assert torch.equal(out.fertility_attention, expected)
    assert out.attention is None  # the alignment attention is still only computed when asked
    with_alignment = model(SRC, TGT_IN, need_attention=True)
    assert_close_for(with_alignment.logits, out.logits, ops=TINY_MODEL_OPS)  # the fused kernel differs in ulps
    if layer == -1 and head is None:  # the alignment layer is the last one too
        assert torch.equal(with_alignment.attention, with_alignment.fertility_attention)


def test_head_is_positive_and_reads_the_encoder_output():
    model = tiny_model(global_fertility={"weight": 0.1, "min_variance": 0.25})
    out = model(SRC, TGT_IN)
    memory = model.encode(SRC).states
    head = model.global_fertility
    raw = head.out(torch.relu(head.hidden(memory)))  # (B, S, 2)
    assert torch.equal(out.fertility_mean, torch.nn.functional.softplus(raw[..., 0]))  # the same ops in the same order
    assert torch.equal(out.fertility_variance, torch.nn.functional.softplus(raw[..., 1]) + 0.25)
    assert bool((out.fertility_mean > 0).all()) and bool((out.fertility_variance >= 0.25).all())


def test_without_global_fertility_nothing_changes():
    model = tiny_model()
    out = model(SRC, TGT_IN)
    assert model.global_fertility is None
    assert out.fertility_mean is None and out.fertility_variance is None and out.fertility_attention is None
    assert not any(name.startswith("global_fertility") for name in model.state_dict())


def test_gradients_reach_the_head_and_the_attention():
    model = tiny_model(global_fertility={"weight": 1.0, "layer": 0}).train()
    out = model(SRC, TGT_IN)
    loss = global_fertility_loss(out.fertility_attention, TGT_OUT.ne(0), SRC.ne(0), out.fertility_mean,
                                 out.fertility_variance)
    loss.backward()
    for name, p in model.global_fertility.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    # α is differentiable: the loss reaches the layer-0 cross-attention queries, but no later layer.
    assert model.decoder_layers[0].cross_attention.q_proj.weight.grad.abs().sum() > 0
    assert model.decoder_layers[1].cross_attention.q_proj.weight.grad is None


def test_model_dir_round_trip_keeps_the_head(tmp_path, tiny_spm):
    model = tiny_model(global_fertility={"weight": 0.05})
    save_model_dir(tmp_path / "m", model, tiny_spm, source_lang="en", target_lang="de")
    loaded = load_model_dir(tmp_path / "m")
    assert loaded.config == tiny_config(global_fertility={"weight": 0.05})
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.model.state_dict()[name], tensor), name


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_the_trainers_objective_adds_the_weighted_term_of_the_reduction(reduction):
    """direction_loss: objective − cross-entropy = weight · Σᵢ −log N(fᵢ; μᵢ, σ²ᵢ) divided by the target
    tokens ("sum", the paper's) or by the source positions ("mean"), fᵢ summed by hand here."""
    from training.data import Batch
    from training.validation import direction_loss

    model = tiny_model(global_fertility={"weight": 0.7, "reduction": reduction}).eval()
    batch = Batch(src=SRC, tgt_in=TGT_IN, tgt_out=TGT_OUT, indices=[0, 1])
    with torch.no_grad():
        out = direction_loss(model, batch, 6, smoothing=0.1, amp=False)
    alpha, mean, variance = out.output.fertility_attention, out.output.fertility_mean, out.output.fertility_variance
    total = 0.0
    for b in range(2):
        for i in range(5):
            if SRC[b, i] == 0:
                continue
            f = sum(float(alpha[b, t, i]) for t in range(4) if TGT_OUT[b, t] != 0)
            mu, var = float(mean[b, i]), float(variance[b, i])
            total += 0.5 * math.log(2 * math.pi * var) + (f - mu) ** 2 / (2 * var)
    divisor = {"sum": 6, "mean": 8}[reduction]  # 6 target tokens (y + EOS), 8 real source positions (x + EOS)
    assert_close_for(float(out.objective - out.xent.loss), 0.7 * total / divisor, ops=TINY_MODEL_OPS)
    assert_close_for(float(out.fertility), total / 8, ops=TINY_MODEL_OPS)  # reported per source position
