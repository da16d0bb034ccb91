"""The global fertility head: options checked as a whole, the configured attention returned, gradients reach the head."""
import pytest
import torch

from model.model_dir import load_model_dir, save_model_dir
from model.config import ModelConfig
from model.errors import ConfigError
from tests.helpers import tiny_config, tiny_model
from training.losses import global_fertility_loss

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
    assert problems({"weight": -0.5, "layer": 3, "head": 4, "min_variance": 0, "colour": "red"}) == [
        "global_fertility: unknown option(s) ['colour']; known options: head, layer, min_variance, weight",
        "global_fertility: weight must be a number >= 0, got -0.5",
        "global_fertility: layer must index a decoder layer in [-3, 3), got 3",
        "global_fertility: head must be null (heads averaged) or a head index in [0, 4), got 4",
        "global_fertility: min_variance must be a number > 0, got 0",
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
                                    "global_fertility": {"weight": 0, "layer": -3, "head": 3, "min_variance": 1e-4}})
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
    assert torch.allclose(with_alignment.logits, out.logits, atol=1e-5)  # the fused kernel differs in ulps
    if layer == -1 and head is None:  # the alignment layer is the last one too
        assert torch.equal(with_alignment.attention, with_alignment.fertility_attention)


def test_head_is_positive_and_reads_the_encoder_output():
    model = tiny_model(global_fertility={"weight": 0.1, "min_variance": 0.25})
    out = model(SRC, TGT_IN)
    memory = model.encode(SRC).states
    head = model.global_fertility
    raw = head.out(torch.relu(head.hidden(memory)))  # (B, S, 2)
    assert torch.allclose(out.fertility_mean, torch.nn.functional.softplus(raw[..., 0]))
    assert torch.allclose(out.fertility_variance, torch.nn.functional.softplus(raw[..., 1]) + 0.25)
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
