"""What counts as nothing to translate (model/text/invisible.py)."""

from __future__ import annotations

import pytest

from model.alignments.word_alignment import group_words
from model.text.invisible import has_visible_text


@pytest.mark.parametrize(
    "text", ["", " \t\n", "\u200d", "\u2063", "\u00ad", "\u0301", "\ue000", "\u200b", "\u200c", "\ufeff", "\x00\u0301\u20e3"]
)
def test_nothing_visible(text):
    assert not has_visible_text(text)


@pytest.mark.parametrize("text", ["a", "\u200ba", "e\u0301", ".", "\u0915\u093f", "\U0001f600", "\u3000\u4e00"])
def test_something_visible(text):
    assert has_visible_text(text)


def test_word_spans_skip_leading_invisibles_and_keep_a_final_combining_mark():
    text = "\u200b cafe\u0301\u00ad x"
    words, owner = group_words(text, ["\u2581cafe\u0301", "\u2581x"], [(0, 8), (8, 10)])
    assert [(w.text, w.start, w.end) for w in words] == [("cafe\u0301", 2, 7), ("x", 9, 10)]
    assert owner == [0, 1]
