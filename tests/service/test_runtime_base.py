"""The runtime interface: option validation, defaults, and the FakeRuntime's own rules."""

from __future__ import annotations

import pytest

from service.runtime.base import DecodeOptions, TextRejected, Translation, TranslationRuntime
from service.runtime.fake import FakeRuntime, fake_pieces


def test_decode_options_report_every_problem_at_once():
    with pytest.raises(ValueError) as info:
        DecodeOptions(beam_size=2, n_best=3, alignment="sentence", max_length_ratio=0, max_length_offset=-1)
    message = str(info.value)
    for fragment in ("n_best must be in 1..beam_size (2), got 3", "alignment must be one of", "max_length_ratio", "max_length_offset"):
        assert fragment in message
    with pytest.raises(ValueError, match="beam_size must be >= 1, got 0"):
        DecodeOptions(beam_size=0)


def test_translation_has_no_alignment_unless_given():
    assert Translation("x", -1.0).alignment is None


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
    assert runtime.calls == [(["Hello world."], DecodeOptions(beam_size=2, n_best=1, alignment="phrase"))]


def test_fake_pieces_split_long_words_and_span_the_space_before():
    assert fake_pieces("hello big") == (["▁hel", "lo", "▁big"], [(0, 3), (3, 5), (5, 9)], [0, 0, 1])


def test_fake_runtime_refuses_empty_and_too_long_texts():
    runtime = FakeRuntime(max_source_pieces=2)
    with pytest.raises(ValueError, match="text 1 is empty"):
        runtime.translate(["a", " "], DecodeOptions())
    with pytest.raises(TextRejected) as info:
        runtime.translate(["a", "b c d"], DecodeOptions())
    assert (info.value.index, info.value.reason) == (1, "has 3 source tokens; this model reads at most 2")


def test_fake_runtime_returns_at_most_one_hypothesis_per_word_order():
    (nbest,) = FakeRuntime().translate(["x y"], DecodeOptions(beam_size=5, n_best=5))
    assert [(t.text, t.score) for t in nbest] == [("Y X", -0.5), ("X Y", -1.0)]
