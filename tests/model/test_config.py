import dataclasses

import pytest

from model.attention.registry import known_attention_kinds, register_attention
from model.config import AttentionConfig, ModelConfig
from model.errors import ConfigError


def test_round_trip_through_dict():
    config = ModelConfig(vocab_size=100, d_model=64, n_heads=4, cross_attention=AttentionConfig("vanilla"))
    assert ModelConfig.from_dict(config.to_dict()) == config


def test_every_problem_is_reported_at_once():
    with pytest.raises(ConfigError) as caught:
        ModelConfig.from_dict({"vocab_size": 100, "d_model": 30, "n_heads": 4, "dropout": 1.5, "colour": "red"})
    assert caught.value.problems == [
        "unknown key 'colour'",
        "dropout must be in [0, 1), got 1.5",
        "d_model (30) must be divisible by n_heads (4)",
    ]


def test_unknown_attention_kind_lists_known_kinds():
    with pytest.raises(ConfigError) as caught:
        ModelConfig(vocab_size=100, cross_attention=AttentionConfig("nope"))
    assert caught.value.problems == [
        f"cross_attention: unknown attention kind 'nope'; known kinds: {', '.join(known_attention_kinds())}"
    ]


def test_vanilla_refuses_options():
    with pytest.raises(ConfigError) as caught:
        ModelConfig.from_dict({"vocab_size": 100, "encoder_self_attention": {"kind": "vanilla", "options": {"n": 2}}})
    assert caught.value.problems == ["encoder_self: attention kind 'vanilla' takes no options, got ['n']"]


def test_schema_version_and_missing_vocab():
    with pytest.raises(ConfigError) as caught:
        ModelConfig.from_dict({"schema_version": 99})
    assert caught.value.problems == [
        "missing key 'vocab_size'",
        "schema_version 99 is not supported (this code reads 1)",
    ]


def test_alignment_layer_must_exist():
    with pytest.raises(ConfigError, match=r"alignment_layer must index a decoder layer in \[-2, 2\), got 2"):
        ModelConfig(vocab_size=100, decoder_layers=2, alignment_layer=2)


def test_config_is_frozen():
    config = ModelConfig(vocab_size=100)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'd_model'"):
        config.d_model = 8  # type: ignore[misc]
    assert config.d_model == ModelConfig(vocab_size=100).d_model


def test_registry_refuses_duplicates():
    with pytest.raises(ValueError, match="attention kind 'vanilla' is already registered by VanillaAttention"):
        register_attention("vanilla")(type("Other", (), {}))


def test_registry_refuses_a_kind_outside_the_contract():
    with pytest.raises(TypeError, match="attention kind 'plain': Plain must derive from model.attention.contract.AttentionModule"):
        register_attention("plain")(type("Plain", (), {}))
