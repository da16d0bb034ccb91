"""The runtime interface: option validation and the default warm-up."""

from __future__ import annotations

import pytest

from service.runtime.base import DecodingOptions, Translation, TranslationRuntime


def test_decode_options_report_every_problem_at_once():
    with pytest.raises(ValueError) as info:
        DecodingOptions(beam_size=2, n_best=3, alignment="sentence", max_length_ratio=-0.5, max_length_offset=-1)
    message = str(info.value)
    for fragment in ("n_best must be in 1..beam_size (2), got 3", "alignment must be one of", "max_length_ratio", "max_length_offset"):
        assert fragment in message
    with pytest.raises(ValueError, match="beam_size must be an integer >= 1, got 0"):
        DecodingOptions(beam_size=0)


def test_a_runtime_must_implement_translate():
    class Incomplete(TranslationRuntime):
        source_lang, target_lang, backend = "en", "de", "none"

    with pytest.raises(TypeError, match="translate"):
        Incomplete()


def test_default_warmup_translates_one_sentence_with_every_alignment():
    class Recording(TranslationRuntime):
        source_lang, target_lang, backend = "en", "de", "recording"

        def __init__(self):
            self.calls = []

        def translate(self, texts, options):
            self.calls.append((list(texts), options))
            return [[Translation("x", 0.0)] for _ in texts]

    runtime = Recording()
    runtime.warmup()
    assert runtime.pair == "en-de"
    assert runtime.calls == [(["Hello world."], DecodingOptions(beam_size=2, n_best=1, alignment="phrase"))]


def test_decode_options_refuse_an_unknown_length_penalty_form():
    assert DecodingOptions(length_penalty_form="gnmt").length_penalty_form == "gnmt"
    with pytest.raises(ValueError) as info:
        DecodingOptions(length_penalty=-1.0, length_penalty_form="mean")
    assert str(info.value) == ("invalid DecodingOptions: length_penalty must be >= 0, got -1.0; "
                               "length_penalty_form must be one of power, gnmt, got 'mean'")
