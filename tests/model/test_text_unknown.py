"""model/text/unknown.py: an unknown piece of a translation (SentencePiece writes " ⁇ ") becomes
the source character it stands for, with piece spans moved to the new text."""
from __future__ import annotations

import pytest

from model.text.tokenizer import Tokenizer
from model.text.unknown import restore
from tests.bundled.expectations import REPO


def test_a_rare_letter_comes_back_and_the_spans_after_it_move():
    # "▁A" "ur" "im" "as" "▁" "<unk>" "ern" "i" "us": the unknown piece's span, trimmed, is (9, 11).
    spans = [(0, 1), (1, 3), (3, 5), (5, 7), (8, 8), (9, 11), (11, 14), (14, 15), (15, 17)]
    text, moved = restore("Aurimas Černius", "Aurimas  ⁇ ernius", [(8, 11)], spans)
    assert text == "Aurimas Černius"
    assert moved == [(0, 1), (1, 3), (3, 5), (5, 7), (8, 8), (8, 9), (9, 12), (12, 13), (13, 15)]
    assert [text[b:e] for b, e in moved] == ["A", "ur", "im", "as", "", "Č", "ern", "i", "us"]


@pytest.mark.parametrize("source, text, unknown, expected", [
    ("Weight ≥ 5 kg", "Gewicht  ⁇  5 kg", [(8, 11)], "Gewicht ≥ 5 kg"),
    ("Ωμέγα", "Ωμ ⁇ γα", [(2, 5)], "Ωμέγα"),
    # One piece for a run of two: the run; two pieces: a character each.
    ("Save 💾💾 file", " ⁇  speichern", [(0, 3)], "💾💾 speichern"),
    ("Save 💾💾 file", " ⁇  ⁇  speichern", [(0, 3), (3, 6)], "💾💾 speichern"),
    # In the source's order; the quotation marks the translation replaced are not candidates.
    ("Open “Ångström” by Łukasz", "»  ⁇ ngström« von  ⁇ ukasz", [(2, 5), (18, 21)], "» Ångström« von Łukasz"),
    # "é" is in the translation: not missing, so not a candidate.
    ("Café Černius", "Café  ⁇ ernius", [(5, 8)], "Café Černius"),
    # ASCII signs only when nothing outside ASCII is missing.
    ("Zoom to 200 %", "Zoom auf 200  ⁇ ", [(13, 16)], "Zoom auf 200 %"),
])
def test_each_unknown_piece_becomes_a_missing_source_character(source, text, unknown, expected):
    assert restore(source, text, unknown)[0] == expected


@pytest.mark.parametrize("text, unknown, expected", [
    ("a  ⁇  b", [(2, 5)], "a b"),
    (" ⁇  speichern", [(0, 3)], "speichern"),
    ("speichern  ⁇ ", [(10, 13)], "speichern"),
    ("ab ⁇ cd", [(2, 5)], "abcd"),
])
def test_with_nothing_missing_an_unknown_piece_is_dropped_with_a_space(text, unknown, expected):
    assert restore("plain words", text, unknown)[0] == expected


def test_a_text_without_unknown_pieces_is_left_alone():
    assert restore("Černius", "Černius", [], [(0, 7)]) == ("Černius", [(0, 7)])


def test_the_tokenizer_gives_the_untrimmed_spans_of_unknown_pieces():
    tokenizer = Tokenizer(REPO / "models" / "en-de-software" / "spm.model")
    ids = [tokenizer._sp.piece_to_id(p) for p in ["▁Gewicht", "▁"]] + [tokenizer.unk_id] + tokenizer.encode("5 kg")
    text, _, spans, unknown = tokenizer.decode_with_unknown(ids)
    assert (text, unknown, tokenizer.unknown_spans(ids)) == ("Gewicht  ⁇  5 kg", [(8, 11)], [(8, 11)])
    assert spans[2] == (9, 11)            # trimmed: the alignment's word spans start at the mark
    assert tokenizer.unknown_spans(tokenizer.encode("5 kg")) == []
    assert restore("Weight ≥ 5 kg", text, unknown)[0] == "Gewicht ≥ 5 kg"


def test_the_sources_space_beside_the_characters_comes_with_them_where_a_word_would_touch_them():
    # The model wrote "Tasten..." without a word boundary after the unknown piece.
    assert restore("⌘⌥⇧ shortcuts", " ⁇ Tastenkürzel", [(0, 3)])[0] == "⌘⌥⇧ Tastenkürzel"
    assert restore("Open file 📂", "Datei öffnen ⁇ ", [(12, 15)])[0] == "Datei öffnen 📂"
    # Inside a word in the source: no space added.
    assert restore("Aurimas Černius", "Aurimas  ⁇ ernius", [(8, 11)])[0] == "Aurimas Černius"


def test_two_unknown_pieces_dropped_at_the_end_drop_their_spaces_once_and_every_span_stays_in_the_text():
    # the software model, given Japanese as English, wrote more unknown pieces than the source had runs
    # of missing characters: the last two are dropped, the second with the space the first dropped too
    # (edits that overlapped had moved a piece's span to (45, 44), a 500 for the request)
    source = "操作に時間がかかりすぎました:ミリ秒かかりましたが、ミリ秒よりも長くかかるべきではありません。"
    text = " ⁇  ⁇  ⁇ : ⁇  ⁇ "
    unknown = [(0, 3), (3, 6), (6, 9), (10, 13), (13, 16)]
    spans = [(0, 0), (1, 3), (4, 6), (7, 9), (9, 10), (11, 13), (14, 16)]
    restored, moved_spans = restore(source, text, unknown, spans)
    assert restored == "操作に時間がかかりすぎましたミリ秒かかりましたがミリ秒よりも長くかかるべきではありません:"
    assert moved_spans == [(0, 0), (0, 14), (14, 24), (24, 44), (44, 45), (45, 45), (45, 45)]
