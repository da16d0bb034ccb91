"""Word alignments from piece attention: exact words, spans, weights and Pharaoh strings."""

from __future__ import annotations

import pytest
import torch

from model.alignments.word_alignment import (TokenAlignment, Word, column_support, group_words, pharaoh, soft_links,
                                            token_alignment)
from tests.helpers import HAND_FORMULA_OPS, assert_close_for

# "Klein ist das Haus." -> "The house is small."  Spans follow SentencePiece: a "▁" piece's
# span starts at the space before the word.
SOURCE = "Klein ist das Haus."
SOURCE_PIECES = ["▁Kl", "ein", "▁ist", "▁das", "▁Haus", "."]
SOURCE_SPANS = [(0, 2), (2, 5), (5, 9), (9, 13), (13, 18), (18, 19)]
TARGET = "The house is small."
TARGET_PIECES = ["▁The", "▁house", "▁is", "▁sm", "all", "."]
TARGET_SPANS = [(0, 3), (3, 9), (9, 12), (12, 15), (15, 18), (18, 19)]
# rows: target pieces; columns: ▁Kl ein ▁ist ▁das ▁Haus .   (rows need not sum to 1)
ATTENTION = [
    [0.05, 0.0, 0.0, 0.9, 0.0, 0.05],  # ▁The
    [0.0, 0.0, 0.0, 0.1, 0.5, 0.4],  # ▁house
    [0.0, 0.0, 0.995, 0.0, 0.005, 0.0],  # ▁is: 0.005 on "Haus." falls under the threshold
    [0.3, 0.3, 0.0, 0.0, 0.0, 0.2],  # ▁sm (sums to 0.8)
    [0.3, 0.3, 0.2, 0.0, 0.0, 0.0],  # all
    [0.0, 0.0, 0.0, 0.0, 0.2, 0.6],  # .
]


def align(attention=ATTENTION, **kwargs) -> TokenAlignment:
    return token_alignment(
        source_text=SOURCE,
        source_pieces=SOURCE_PIECES,
        source_spans=SOURCE_SPANS,
        target_text=TARGET,
        target_pieces=TARGET_PIECES,
        target_spans=TARGET_SPANS,
        attention=attention,
        **kwargs,
    )


def assert_links(actual, expected, dtype=torch.float64):
    assert [[i for i, _ in row] for row in actual] == [[i for i, _ in row] for row in expected]
    for got, want in zip(actual, expected):
        assert_close_for([w for _, w in got], [w for _, w in want], ops=HAND_FORMULA_OPS, dtype=dtype)


def test_words_merge_subwords_and_trim_the_space_before_them():
    alignment = align()
    assert alignment.source_words == [
        Word("Klein", 0, 5), Word("ist", 6, 9), Word("das", 10, 13), Word("Haus.", 14, 19)
    ]
    assert alignment.target_words == [
        Word("The", 0, 3), Word("house", 4, 9), Word("is", 10, 12), Word("small.", 13, 19)
    ]
    for word in alignment.source_words:
        assert SOURCE[word.start : word.end] == word.text
    for word in alignment.target_words:
        assert TARGET[word.start : word.end] == word.text


def test_links_sum_source_pieces_average_target_pieces_and_drop_tiny_weights():
    # The "." glued to "Haus." and to "small." is no evidence for either word: its column's mass goes
    # to the row's other words in proportion, and its row is not averaged into "small.".
    # small. = mean of rows ▁sm, all: Klein (0.6+0.6)/2, ist 0.2/2 (of kept mass 0.7 -> 6/7, 1/7).
    assert_links(
        align().links,
        [
            [(2, 18 / 19), (0, 1 / 19)],  # The: 0.9 and 0.05 of the 0.95 off "."
            [(3, 5 / 6), (2, 1 / 6)],  # house: "▁Haus" 0.5 against "▁das" 0.1 (its 0.4 on "." spread)
            [(1, 1.0)],  # is: 0.005 dropped, the rest renormalised
            [(0, 6 / 7), (1, 1 / 7)],  # small.: "▁Kl" + "ein" summed into "Klein", rows averaged
        ],
    )


def test_hard_links_and_pharaoh():
    alignment = align()
    assert alignment.hard == [(2, 0), (3, 1), (1, 2), (0, 3)]
    assert alignment.pharaoh == "0-3 1-2 2-0 3-1"


def test_threshold_is_a_parameter_and_weights_are_renormalised():
    alignment = align(min_weight=0.1)
    # The: 1/19 < 0.1 dropped, the heaviest is alone; small.: 1/7 kept.
    assert_links(alignment.links[:1], [[(2, 1.0)]])
    assert_links(alignment.links[3:], [[(0, 6 / 7), (1, 1 / 7)]])
    # house at 0.2: 1/6 dropped, 5/6 renormalised to 1.
    assert_links(align(min_weight=0.2).links[1:2], [[(3, 1.0)]])


def test_torch_tensor_gives_the_same_alignment_as_lists():
    from_tensor = align(torch.tensor(ATTENTION, dtype=torch.float64))
    assert from_tensor == align()
    from_float32 = align(torch.tensor(ATTENTION, dtype=torch.float32))
    assert from_float32.pharaoh == "0-3 1-2 2-0 3-1"
    assert_links(from_float32.links[3:], [[(0, 6 / 7), (1, 1 / 7)]], dtype=torch.float32)


def test_bare_boundary_piece_is_skipped_and_the_next_piece_starts_a_word():
    # SentencePiece writes "▁" alone before a piece it has no "▁"-prefixed form of.
    text = "Er sagt „Hallo“"
    pieces = ["▁Er", "▁sagt", "▁", "„", "Hallo", "“"]
    spans = [(0, 2), (2, 7), (7, 8), (8, 9), (9, 14), (14, 15)]
    words, owner = group_words(text, pieces, spans)
    assert words == [Word("Er", 0, 2), Word("sagt", 3, 7), Word("„Hallo“", 8, 15)]
    assert owner == [0, 1, None, 2, 2, 2]


def test_empty_span_pieces_and_leading_pieces_without_boundary():
    # A first piece without "▁" still starts a word; a bare "▁" with an empty span is skipped.
    text = "ab cd"
    words, owner = group_words(text, ["a", "b", "▁", "▁cd"], [(0, 1), (1, 2), (2, 2), (2, 5)])
    assert words == [Word("ab", 0, 2), Word("cd", 3, 5)]
    assert owner == [0, 0, None, 1]


def test_mass_on_skipped_pieces_is_dropped_before_normalising():
    # Source "a „b" with a bare "▁": its column (0.5) belongs to no word. The "„" glued to "b" is
    # spread over the row in proportion: a 0.1, „b 0.2 of the 0.3 kept -> 1/3, 2/3.
    alignment = token_alignment(
        source_text="a „b",
        source_pieces=["▁a", "▁", "„", "b"],
        source_spans=[(0, 1), (1, 2), (2, 3), (3, 4)],
        target_text="x",
        target_pieces=["▁x"],
        target_spans=[(0, 1)],
        attention=[[0.1, 0.5, 0.2, 0.2]],
    )
    assert alignment.source_words == [Word("a", 0, 1), Word("„b", 2, 4)]
    assert_links(alignment.links, [[(1, 2 / 3), (0, 1 / 3)]])
    assert alignment.pharaoh == "1-0"


def test_a_target_word_with_no_attention_has_no_links_and_no_hard_link():
    alignment = token_alignment(
        source_text="a b",
        source_pieces=["▁a", "▁b"],
        source_spans=[(0, 1), (1, 3)],
        target_text="x y",
        target_pieces=["▁x", "▁y"],
        target_spans=[(0, 1), (1, 3)],
        attention=[[0.0, 0.0], [0.25, 0.75]],
    )
    assert_links(alignment.links, [[], [(1, 0.75), (0, 0.25)]])
    assert alignment.hard == [(1, 1)]
    assert alignment.pharaoh == "1-1"


def test_empty_source_and_target():
    empty = token_alignment(
        source_text="", source_pieces=[], source_spans=[],
        target_text="", target_pieces=[], target_spans=[],
        attention=torch.zeros(0, 0),
    )
    assert empty == TokenAlignment.empty()
    assert empty == TokenAlignment([], [], [], [], "")


def test_empty_source_keeps_target_words_without_links():
    alignment = token_alignment(
        source_text="", source_pieces=[], source_spans=[],
        target_text="Hallo Welt", target_pieces=["▁Hallo", "▁Welt"], target_spans=[(0, 5), (5, 10)],
        attention=torch.zeros(2, 0),
    )
    assert alignment.source_words == []
    assert alignment.target_words == [Word("Hallo", 0, 5), Word("Welt", 6, 10)]
    assert alignment.links == [[], []]
    assert alignment.hard == [] and alignment.pharaoh == ""


def test_empty_target_keeps_source_words():
    alignment = token_alignment(
        source_text="hi", source_pieces=["▁hi"], source_spans=[(0, 2)],
        target_text="", target_pieces=[], target_spans=[],
        attention=torch.zeros(0, 1),
    )
    assert alignment == TokenAlignment([Word("hi", 0, 2)], [], [], [], "")


def test_attention_shape_must_match_the_pieces():
    with pytest.raises(ValueError, match="expected 6 rows .* of width 6"):
        align(ATTENTION[:5])
    with pytest.raises(ValueError, match="expected 6 rows"):
        align([row + [0.0] for row in ATTENTION])  # e.g. an EOS column left in


def test_spans_outside_the_text_are_refused():
    with pytest.raises(ValueError, match="outside a string of length 2"):
        group_words("hi", ["▁hi"], [(0, 3)])


def test_soft_links_and_pharaoh_helpers():
    assert soft_links([1.0, 3.0, 0.0]) == [(1, 0.75), (0, 0.25)]
    assert soft_links([0.0, 0.0]) == []
    assert soft_links([float("nan"), 1.0]) == []
    # The heaviest link survives even a threshold above it.
    assert soft_links([0.5, 0.5], min_weight=0.9) == [(0, 1.0)]
    assert pharaoh([(2, 0), (0, 1), (0, 0)]) == "0-0 0-1 2-0"


def test_punctuation_glued_to_words_does_not_link_them():
    # "Delete the folder?" -> "Ordner löschen?": the two question marks attend to each other. Averaged
    # in, "?" made "löschen?" link to "folder?" (0.52 against "Delete" 0.48 with the rows below) and a
    # tag around "folder" wrapped "Ordner löschen".
    alignment = token_alignment(
        source_text="Delete the folder?",
        source_pieces=["▁Delete", "▁the", "▁folder", "?"],
        source_spans=[(0, 6), (6, 10), (10, 17), (17, 18)],
        target_text="Ordner löschen?",
        target_pieces=["▁Ordner", "▁löschen", "?"],
        target_spans=[(0, 6), (6, 14), (14, 15)],
        attention=[[0.0, 0.0, 1.0, 0.0], [0.96, 0.0, 0.0, 0.04], [0.0, 0.0, 0.0, 1.0]],
    )
    assert_links(alignment.links, [[(2, 1.0)], [(0, 1.0)]])
    assert alignment.pharaoh == "0-1 2-0"
    # A word of punctuation alone keeps its links.
    alone = token_alignment(source_text="a ?", source_pieces=["▁a", "▁?"], source_spans=[(0, 1), (1, 3)],
                            target_text="?", target_pieces=["▁?"], target_spans=[(0, 1)], attention=[[0.25, 0.75]])
    assert_links(alone.links, [[(1, 0.75), (0, 0.25)]])


def test_the_columns_support_is_a_target_words_largest_share_of_a_source_words_column():
    rows = [[0.8, 0.2], [0.6, 0.4], [0.0, 0.0]]
    # Column 0 sums to 1.4, column 1 to 0.6: row 0 has 0.8/1.4 and 0.2/0.6, row 1 0.6/1.4 and 0.4/0.6.
    assert column_support(rows) == [pytest.approx(0.8 / 1.4), pytest.approx(0.4 / 0.6), 0.0]
    assert column_support([]) == []
    alignment = token_alignment(
        source_text="a b", source_pieces=["▁a", "▁b"], source_spans=[(0, 1), (2, 3)],
        target_text="x y", target_pieces=["▁x", "▁y"], target_spans=[(0, 1), (2, 3)],
        attention=torch.tensor(rows[:2]), symmetric=True)
    assert alignment.support_from == "columns"
    assert alignment.support == [pytest.approx(0.8 / 1.4), pytest.approx(0.4 / 0.6)]
    # Raw attention (not a supervised head's) gives no support: its columns are spread too thin to read.
    plain = token_alignment(
        source_text="a b", source_pieces=["▁a", "▁b"], source_spans=[(0, 1), (2, 3)],
        target_text="x y", target_pieces=["▁x", "▁y"], target_spans=[(0, 1), (2, 3)],
        attention=torch.tensor(rows[:2]))
    assert (plain.support, plain.support_from) == (None, None)
