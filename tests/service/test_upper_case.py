"""A text in capitals reaches the model in sentence case and is answered in capitals
(service/upper_case.py)."""
from __future__ import annotations

import pytest

from model.alignments.word_alignment import TokenAlignment, Word
from service.app import create_app
from service.runtime.base import Translation
from service.settings import Settings
from service.upper_case import sentence_cased, upper_case, upper_cased
from testing.fake_runtime import FakeRuntime
from tests.service.support import serving


@pytest.mark.parametrize("text, cased", [
    ("II. A GAME OF CHESS", "II. A game of chess"),                  # a chapter's numeral kept
    ("WARNING: DO NOT OPEN. I MEAN IT!", "Warning: do not open. I mean it!"),
    ("CHAPTER IV THE END", "Chapter IV the end"),
    ("MIX AND MATCH", "Mix and match"),                              # a numeral's letters, no numeral
    ("XLII. THE ANSWER", "XLII. The answer"),
    ("ÉTÉ À PARIS", "Été à paris"),
])
def test_a_text_in_capitals_goes_in_sentence_case_each_character_where_it_stood(text, cased):
    assert upper_case(text) and sentence_cased(text) == cased and len(cased) == len(text)


@pytest.mark.parametrize("text", ["OK", "USB", "Two dogs", "FILE %s NOT FOUND", "123 ABC", "STRASSE İSTANBUL"])
def test_a_short_word_an_acronym_a_mixed_text_or_a_letter_of_two_lower_cases_is_not_in_capitals(text):
    assert not upper_case(text)


def test_the_translation_in_capitals_keeps_its_offsets_and_writes_sharp_s_as_its_capital():
    source = "BIG STREET"
    alignment = TokenAlignment([Word("big", 0, 3), Word("street", 4, 10)], [Word("Große", 0, 5), Word("Straße", 6, 12)],
                               [[(0, 1.0)], [(1, 1.0)]], [(0, 0), (1, 1)], "0-0 1-1")
    out = upper_cased(Translation("Große Straße", -1.0, alignment), source)
    assert out.text == "GROẞE STRAẞE"
    assert [w.text for w in out.alignment.source_words] == ["BIG", "STREET"]
    assert [w.text for w in out.alignment.target_words] == ["GROẞE", "STRAẞE"]


def test_the_service_sends_the_model_sentence_case_and_answers_in_capitals(tmp_path):
    runtime = FakeRuntime("en", "de")
    app = create_app(Settings(model_dirs=[tmp_path / "en-de"], warmup=False), runtime_factory=lambda settings: [runtime])
    with serving(app) as client:
        answer = client.post("/translate", json={"source": "en", "target": "de", "text": "TWO DOGS PLAY",
                                                 "alignment": "token"}).json()["translations"][0][0]
    assert [texts for texts, _ in runtime.calls] == [["Two dogs play"]]
    assert answer["text"] == "PLAY DOGS TWO"
    assert [w["text"] for w in answer["alignment"]["source_words"]] == ["TWO", "DOGS", "PLAY"]
