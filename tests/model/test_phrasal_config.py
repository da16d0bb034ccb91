"""Phrasal attention options: every problem reported at once, impossible combinations refused with a reason."""
import pytest

from model.attention.registry import known_attention_kinds
from model.config import AttentionConfig, ModelConfig
from model.errors import ConfigError


def problems(**sites):
    with pytest.raises(ConfigError) as caught:
        ModelConfig.from_dict({"vocab_size": 100, "d_model": 32, "n_heads": 4, **sites})
    return caught.value.problems


def test_phrasal_kinds_are_registered_beside_vanilla():
    assert known_attention_kinds() == ["convkv", "fine2d", "queryk", "vanilla"]


def test_every_site_reports_its_own_problems_at_once():
    assert problems(
        encoder_self_attention={"kind": "convkv", "options": {"structure": "interleaved", "ngrams": [1, 2, 3]}},
        decoder_self_attention={"kind": "queryk", "options": {"structure": "heterogeneous", "heads_per_ngram": [2, 2]}},
        cross_attention={"kind": "convkv", "options": {"structure": "homogeneous", "ngrams": [1, 2], "heads_per_ngram": [3, 3]}},
    ) == [
        "encoder_self: attention kind 'convkv': structure 'interleaved' needs ngrams [1, 2] "
        "(it interleaves unigram and bigram outputs), got [1, 2, 3]",
        "decoder_self: attention kind 'queryk': heads_per_ngram is only for structure 'homogeneous', got it with 'heterogeneous'",
        "cross: attention kind 'convkv': heads_per_ngram [3, 3] sums to 6, but the model has n_heads = 4",
    ]


def test_unknown_options_and_a_missing_structure():
    assert problems(cross_attention={"kind": "queryk", "options": {"ngrams": [1, 2], "colour": 1}}) == [
        "cross: attention kind 'queryk': unknown option(s) ['colour']; known options: edge, heads_per_ngram, ngrams, structure",
        "cross: attention kind 'queryk': option 'structure' is required, one of homogeneous, heterogeneous, interleaved",
    ]


def test_bad_structure_and_ngrams():
    assert problems(cross_attention={"kind": "convkv", "options": {"structure": "flat", "ngrams": [0, 9]}}) == [
        "cross: attention kind 'convkv': structure must be one of homogeneous, heterogeneous, interleaved, got 'flat'",
        "cross: attention kind 'convkv': ngrams must be a non-empty list of increasing integers in [1, 8], got [0, 9]",
    ]
    assert problems(encoder_self_attention={"kind": "queryk", "options": {"structure": "heterogeneous", "ngrams": [2, 1]}}) == [
        "encoder_self: attention kind 'queryk': ngrams must be a non-empty list of increasing integers in [1, 8], got [2, 1]",
    ]


def test_head_splits_must_fit_the_model():
    assert problems(cross_attention={"kind": "convkv", "options": {"structure": "homogeneous", "ngrams": [1, 2, 3]}}) == [
        "cross: attention kind 'convkv': n_heads = 4 cannot be split evenly among 3 n-gram sizes; give heads_per_ngram",
    ]
    assert problems(cross_attention={
        "kind": "convkv", "options": {"structure": "homogeneous", "ngrams": [1, 2], "heads_per_ngram": [4, 0]}
    }) == [
        "cross: attention kind 'convkv': heads_per_ngram must list a positive number of heads for each of the 2 n-gram sizes, got [4, 0]",
    ]


def test_valid_configs_round_trip():
    homogeneous = AttentionConfig("convkv", {"structure": "homogeneous", "ngrams": [1, 2, 3], "heads_per_ngram": [2, 1, 1]})
    config = ModelConfig(
        vocab_size=100, d_model=32, n_heads=4, encoder_self_attention=homogeneous,
        decoder_self_attention=AttentionConfig("queryk", {"structure": "interleaved"}),
        cross_attention=AttentionConfig("queryk", {"structure": "heterogeneous", "ngrams": [1, 2, 3]}),
    )
    assert ModelConfig.from_dict(config.to_dict()) == config
    # The kind name alone is not enough: the structure is part of the model.
    with pytest.raises(ConfigError, match="option 'structure' is required"):
        ModelConfig.from_dict({"vocab_size": 100, "cross_attention": "queryk"})
