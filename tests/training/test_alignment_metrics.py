"""Gold parsing, P/R/AER and symmetrisation on hand-made examples (training.alignment_metrics)."""
import pytest

from training import alignment_metrics as am
from training.alignment_metrics import AlignmentInputError, Counts, GoldAlignment


# -- scores ------------------------------------------------------------------------------------------
def test_aer_of_a_hand_made_example():
    # A = {0-0, 1-1, 2-1}, S = {0-0, 1-1}, P = S ∪ {2-2}
    # A∩S = {0-0, 1-1} (2), A∩P = {0-0, 1-1} (2: 2-1 is not possible either)
    # precision = |A∩P|/|A| = 2/3, recall = |A∩S|/|S| = 2/2 = 1, AER = 1 − (2 + 2)/(3 + 2) = 0.2
    gold = GoldAlignment.of({(0, 0), (1, 1)}, {(2, 2)})
    counts = am.score([{(0, 0), (1, 1), (2, 1)}], [gold])
    assert counts == Counts(links=3, sure=2, possible=3, hits_sure=2, hits_possible=2)
    assert counts.precision == pytest.approx(2 / 3)
    assert counts.recall == 1.0
    assert counts.aer == pytest.approx(0.2)


def test_corpus_counts_are_summed_before_dividing():
    # Sentence 1 as above (|A|=3, |S|=2, |A∩S|=2, |A∩P|=2).
    # Sentence 2: A = {0-0}, S = {0-1}, P = {0-1, 0-0}: |A|=1, |S|=1, |A∩S|=0, |A∩P|=1.
    # Corpus: precision = (2+1)/(3+1) = 3/4, recall = (2+0)/(2+1) = 2/3, AER = 1 − (2+3)/(4+3) = 2/7,
    # not the mean of the sentence AERs ((0.2 + 0.5)/2 = 0.35).
    gold = [GoldAlignment.of({(0, 0), (1, 1)}, {(2, 2)}), GoldAlignment.of({(0, 1)}, {(0, 0)})]
    counts = am.score([{(0, 0), (1, 1), (2, 1)}, {(0, 0)}], gold)
    assert (counts.precision, counts.recall, counts.aer) == (pytest.approx(3 / 4), pytest.approx(2 / 3),
                                                             pytest.approx(2 / 7))
    assert counts.to_dict()["aer"] == pytest.approx(2 / 7)


def test_undefined_ratios_are_none_and_a_perfect_alignment_scores_zero():
    assert (Counts().precision, Counts().recall, Counts().aer) == (None, None, None)
    gold = GoldAlignment.of({(0, 0)}, {(1, 1)})
    perfect = am.score([{(0, 0)}], [gold])
    assert (perfect.precision, perfect.recall, perfect.aer) == (1.0, 1.0, 0.0)
    # Adding a possible link costs nothing; adding an impossible one costs precision.
    assert am.score([{(0, 0), (1, 1)}], [gold]).aer == 0.0
    assert am.score([{(0, 0), (1, 0)}], [gold]).aer == pytest.approx(1 - (1 + 1) / (2 + 1))
    with pytest.raises(ValueError, match="2 predicted alignments but 1 gold ones"):
        am.score([set(), set()], [gold])


# -- parsing ---------------------------------------------------------------------------------------
def test_pharaoh_sure_and_every_spelling_of_possible():
    gold = am.parse_pharaoh_line("0-0 1-1 2p2 3?3 4-4p 5-5P")
    assert gold.sure == {(0, 0), (1, 1)}
    assert gold.possible == {(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)}  # S ⊆ P


def test_pharaoh_one_based_and_reversed():
    assert am.parse_pharaoh_line("1-1 2-3p", base=1) == GoldAlignment.of({(0, 0)}, {(1, 2)})
    # reverse: the file writes target-source: "0-1" is target 0, source 1; "2-1p" target 2, source 1
    assert am.parse_pharaoh_line("0-1 2-1p", reverse=True) == GoldAlignment.of({(1, 0)}, {(1, 2)})
    with pytest.raises(AlignmentInputError) as error:
        am.parse_pharaoh_line("0-1", base=1, where="g line 4")
    assert str(error.value) == "g line 4: link '0-1' has an index below 1 (indices are 1-based)"
    with pytest.raises(AlignmentInputError) as error:
        am.parse_pharaoh_line("0-1 2:3", where="g line 2")
    assert str(error.value) == "g line 2: '2:3' is not a link (i-j, i-jp, ipj or i?j)"


def test_naacl_lines_with_null_links_confidences_and_missing_sentences():
    lines = ["1 1 1 S", "1 2 3 P", "1 0 2", "", "2 3 1", "2 2 2 P 0.7", "2 1 1 0.9"]
    gold = am.parse_naacl(lines, n_sentences=3)
    assert gold[0] == GoldAlignment.of({(0, 0)}, {(1, 2)})  # "1 0 2" links the NULL word: dropped
    assert gold[1] == GoldAlignment.of({(2, 0), (0, 0)}, {(1, 1)})  # no S|P means S; "0.9" is a confidence
    assert gold[2] == GoldAlignment.of(set())  # no lines: no links
    zero = am.parse_naacl(["0 0 0", "1 2 1 P"], n_sentences=2, base=0)
    assert zero == [GoldAlignment.of({(0, 0)}), GoldAlignment.of(set(), {(2, 1)})]
    assert am.parse_naacl(["1 2 1 S"], 1, reverse=True) == [GoldAlignment.of({(0, 1)})]


def test_naacl_errors_name_the_line():
    with pytest.raises(AlignmentInputError) as error:
        am.parse_naacl(["1 1 1", "4 1 1 S"], n_sentences=3, name="g.naacl")
    assert str(error.value) == "g.naacl line 2: sentence 4 is outside the 3 sentences of the text files (1-based)"
    with pytest.raises(AlignmentInputError) as error:
        am.parse_naacl(["1 1 1 X"], n_sentences=3, name="g.naacl")
    assert str(error.value) == "g.naacl line 1: '1 1 1 X' is not 'sent i j [S|P] [confidence]'"


def test_read_gold_detects_the_format_and_its_default_base():
    assert am.detect_format(["", "1 2 3 S"]) == "naacl"
    assert am.detect_format(["1-2 3-4"]) == "pharaoh"
    assert am.detect_format(["", ""]) == "pharaoh"
    gold, fmt, base = am.read_gold(["1 1 2 S"], 1)
    assert (gold, fmt, base) == ([GoldAlignment.of({(0, 1)})], "naacl", 1)
    gold, fmt, base = am.read_gold(["0-1", ""], 2)
    assert (gold, fmt, base) == ([GoldAlignment.of({(0, 1)}), GoldAlignment.of(set())], "pharaoh", 0)
    gold, _, base = am.read_gold(["1-2"], 1, "pharaoh", base=1)
    assert (gold, base) == ([GoldAlignment.of({(0, 1)})], 1)
    with pytest.raises(AlignmentInputError) as error:
        am.read_gold(["0-0", "1-1"], 3, name="g.txt")
    assert str(error.value) == "g.txt has 2 lines but the text files have 3 sentences"


def test_bounds_error_names_the_sentence_and_the_link_in_the_files_base():
    gold = [GoldAlignment.of({(0, 0)}), GoldAlignment.of({(1, 1)}, {(3, 1)})]
    am.check_bounds(gold, [1, 4], [1, 2])
    with pytest.raises(AlignmentInputError) as error:
        am.check_bounds(gold, [1, 3], [1, 2], base=1, name="g.txt")
    assert str(error.value) == ("g.txt: sentence 2 (line 2 of the text files): link 4-2 (source-target, 1-based) "
                                "is outside a pair of 3 source and 2 target words")


def test_aligner_output_parsing_and_writing():
    assert am.parse_links("2-1 0-0") == {(0, 0), (2, 1)}
    assert am.pharaoh({(2, 1), (0, 0), (0, 3)}) == "0-0 0-3 2-1"
    with pytest.raises(AlignmentInputError, match="an aligner's output has no possible links"):
        am.parse_links("0p0")


# -- symmetrisation --------------------------------------------------------------------------------
FORWARD = {(0, 0), (1, 1), (3, 2), (2, 3), (4, 4)}  # one source word per target word
REVERSE = {(0, 0), (1, 1), (2, 2), (3, 0), (4, 0)}  # one target word per source word


def test_intersection_union_and_transpose():
    assert am.intersection(FORWARD, REVERSE) == {(0, 0), (1, 1)}
    assert am.union(FORWARD, REVERSE) == {(0, 0), (1, 1), (3, 2), (2, 3), (4, 4), (2, 2), (3, 0), (4, 0)}
    assert am.transpose({(0, 2), (1, 0)}) == {(2, 0), (0, 1)}


def test_grow_diag_final_on_a_hand_example():
    # start: intersection {0-0, 1-1}; union adds 3-2 2-3 4-4 2-2 3-0 4-0.
    # GROW-DIAG pass 1, walking (i, j) row by row:
    #   (0,0): no neighbour in the union with an unaligned word.
    #   (1,1): neighbour (2,2) is in the union and source 2 is unaligned -> add 2-2.
    #   (2,2): (3,2) in the union, source 3 unaligned -> add; (2,3) in the union, target 3 unaligned -> add.
    #   (2,3), (3,2): every neighbour in the union is already fully aligned.
    #   4-4 and 4-0 touch no alignment point, 3-0 joins two aligned words: none is grown.
    # pass 2 adds nothing.
    # FINAL(forward): 4-4 (source 4 and target 4 unaligned) -> add.
    # FINAL(reverse): 3-0 (both aligned) no; 4-0 (source 4 is aligned since FINAL(forward)) no.
    expected = {(0, 0), (1, 1), (2, 2), (2, 3), (3, 2), (4, 4)}
    assert am.grow_diag_final(FORWARD, REVERSE) == expected
    # FINAL's order matters: with the directions swapped, 4-0 comes in first (source 4 unaligned), and
    # 4-4 still does after it (target 4 unaligned: FINAL asks for one unaligned word, not both).
    assert am.grow_diag_final(REVERSE, FORWARD) == expected | {(4, 0)}


def test_grow_diag_final_grows_along_a_diagonal_chain():
    # intersection {0-0}; the union's 1-1, 2-2, 3-3 each neighbour the point added before -> grown in one
    # pass; 0-3 neighbours none of them and joins two aligned words by then: neither GROW nor FINAL adds it.
    forward = {(0, 0), (1, 1), (2, 2), (3, 3)}
    reverse = {(0, 0), (0, 3)}
    assert am.grow_diag_final(forward, reverse) == forward
    # ... but a union point diagonal to an alignment point is grown: from 1-1, (-1, +1) reaches 0-2.
    assert am.grow_diag_final(forward, {(0, 0), (0, 2)}) == forward | {(0, 2)}
    assert am.grow_diag_final(set(), set()) == set()
    assert am.grow_diag_final({(0, 0)}, set()) == {(0, 0)}  # FINAL alone


def test_diagonal_baseline():
    assert am.diagonal(3, 3) == {(0, 0), (1, 1), (2, 2)}
    # j -> int((j + 0.5) * 2 / 4): 0, 0, 1, 1
    assert am.diagonal(2, 4) == {(0, 0), (0, 1), (1, 2), (1, 3)}
    assert am.diagonal(0, 2) == set()
