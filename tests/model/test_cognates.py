"""The orthographic prior (model/alignments/cognates.py): spellings, edit-distance similarities by hand,
the pairs that count, and its effect on the bidirectional and single-head readings of a constructed
case: the hard links change, the soft links (the models' weights) do not."""
import pytest

from model.alignments.bidirectional import bidirectional_alignment
from model.alignments.cognates import COGNATE_WEIGHT, cognate_matrix, similarity, spelling, with_cognates
from model.alignments.word_alignment import TokenAlignment, Word, token_alignment


def test_spelling_keeps_letters_and_digits_lowercased_without_diacritics():
    assert spelling("Präsident,") == "prasident"
    assert spelling("EU-Haushalts") == "euhaushalts"
    assert spelling("Straße") == "straße"  # ß is a letter of its own, not an s with a mark
    assert spelling("«2003»") == "2003"


def test_similarity_is_one_minus_edit_distance_over_the_longer_length():
    assert similarity("prasident", "president") == pytest.approx(1 - 1 / 9)  # one substitution
    assert similarity("kommissar", "commissioner") == pytest.approx(1 - 5 / 12)  # k/c, a/i, +o +n +e
    assert similarity("little", "klettert") == pytest.approx(1 - 5 / 8)  # shared letters, another order
    assert similarity("haus", "haus") == 1.0


def test_only_long_enough_words_spelt_alike_count():
    matrix = cognate_matrix(["Mr", "President", "Commission", "little"], ["Herr", "Präsident", "Kommission", "klettert"])
    assert matrix == [
        [0.0, 0.0, 0.0, 0.0],  # "herr": nothing spelt alike ("mr" is too short anyway)
        [0.0, pytest.approx(8 / 9), 0.0, 0.0],
        [0.0, 0.0, pytest.approx(0.9), 0.0],  # commission/kommission: one substitution in 10
        [0.0, 0.0, 0.0, 0.0],  # little/klettert: 0.375, under COGNATE_SIMILARITY
    ]
    assert cognate_matrix(["have"], ["haben"]) == [[0.6]]  # 1 − 2/5: the threshold itself counts
    assert cognate_matrix(["die"], ["die"]) == [[0.0]]  # three letters: chance matches across languages
    assert cognate_matrix([], ["haus"]) == [[]] and cognate_matrix(["haus"], []) == []


def test_with_cognates_adds_the_weighted_similarity_and_weight_zero_adds_nothing():
    weights = [[0.7, 0.3]]
    assert with_cognates(weights, ["the", "president"], ["Präsident"]) == [
        [0.7, pytest.approx(0.3 + COGNATE_WEIGHT * 8 / 9)]]
    assert with_cognates(weights, ["the", "president"], ["Präsident"], weight=0.0) == [[0.7, 0.3]]


def _words(*texts):
    words, start = [], 0
    for text in texts:
        words.append(Word(text, start, start + len(text)))
        start += len(text) + 1
    return words


def test_the_prior_turns_a_links_reading_in_the_bidirectional_method():
    src, tgt = _words("the", "president"), _words("der", "Präsident")
    # Both models put "president"/"Präsident" on "the"/"der" (as an out-of-domain model does).
    forward = TokenAlignment(src, tgt, [[(0, 0.9), (1, 0.1)], [(0, 0.7), (1, 0.3)]], [], "")
    reverse = TokenAlignment(tgt, src, [[(0, 0.9), (1, 0.1)], [(0, 0.8), (1, 0.2)]], [], "")
    # Combined √(p(i|j)·p(j|i)): j0 [.9, √.08], j1 [√.07, √.06]. Row argmaxes 0-0 and 0-1, column
    # argmaxes 0-0 and 1-0; grow-diag-final-and adds both neighbours of 0-0 (each links an unaligned
    # word), and each passes the agreement threshold.
    plain = bidirectional_alignment(forward, reverse, cognate_weight=0.0)
    assert plain.pharaoh == "0-0 0-1 1-0"
    # The prior adds 2 × 8/9 to 1-1, which becomes both its row's and its column's best.
    with_prior = bidirectional_alignment(forward, reverse)
    assert with_prior.pharaoh == "0-0 1-1"
    assert with_prior.links == plain.links  # the soft links are the models' weights, prior or not
    assert with_prior.links[1] == [(0, pytest.approx(0.07 ** 0.5 / (0.07 ** 0.5 + 0.06 ** 0.5))),
                                   (1, pytest.approx(0.06 ** 0.5 / (0.07 ** 0.5 + 0.06 ** 0.5)))]


def test_the_prior_enters_the_supervised_methods_matrix_reading_only():
    pieces = dict(source_text="the president", source_pieces=["▁the", "▁president"], source_spans=[(0, 3), (4, 13)],
                  target_text="der Präsident", target_pieces=["▁der", "▁Präsident"], target_spans=[(0, 3), (4, 13)])
    rows = [[0.9, 0.1], [0.7, 0.3]]
    read = token_alignment(attention=rows, symmetric=True, **pieces)
    unread = token_alignment(attention=rows, symmetric=True, cognate_weight=0.0, **pieces)
    # The matrix alone, read both ways: row argmaxes 0-0 and 0-1, column argmaxes 0-0 and 1-1
    # (column 1 is [0.1, 0.3]); grow-diag-final-and keeps all three.
    assert unread.pharaoh == "0-0 0-1 1-1"
    assert read.pharaoh == "0-0 1-1"  # the prior makes 1-1 target 1's best, so 0-1 is no row's argmax
    assert read.links == unread.links == [[(0, pytest.approx(0.9)), (1, pytest.approx(0.1))],
                                          [(0, pytest.approx(0.7)), (1, pytest.approx(0.3))]]
    # One link per target word (no symmetrisation): the prior is not used.
    assert token_alignment(attention=rows, **pieces).pharaoh == "0-0 0-1"


def test_the_bidirectional_support_of_a_target_word_is_the_reverse_models_largest_weight_on_it():
    src, tgt = _words("the", "president"), _words("der", "Präsident")
    forward = TokenAlignment(src, tgt, [[(0, 0.9), (1, 0.1)], [(0, 0.7), (1, 0.3)]], [], "")
    # reverse.links[i]: source word i ("the", "president") over the target words ("der", "Präsident").
    reverse = TokenAlignment(tgt, src, [[(0, 0.9), (1, 0.1)], [(0, 0.8), (1, 0.2)]], [], "")
    combined = bidirectional_alignment(forward, reverse)
    assert (combined.support, combined.support_from) == ([0.9, 0.2], "reverse")
