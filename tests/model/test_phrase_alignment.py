"""Phrase maps from a word alignment (consistent extraction) and from phrase attention."""
from __future__ import annotations

import pytest

from model.alignments.word_alignment import TokenAlignment, Word
from model.alignments.phrase_pairs import PhrasePair, attended_phrase_pairs, extracted_phrase_pairs
from model.alignments.attention_phrases import PhraseLink


def words(text: str) -> list[Word]:
    out, start = [], 0
    for token in text.split():
        start = text.index(token, start)
        out.append(Word(token, start, start + len(token)))
        start += len(token)
    return out


def alignment(n_source: int, n_target: int, links: dict[int, list[tuple[int, float]]]) -> TokenAlignment:
    """links: target word -> [(source word, weight)], heaviest first (the hard link)."""
    rows = [links.get(j, []) for j in range(n_target)]
    hard = [(row[0][0], j) for j, row in enumerate(rows) if row]
    return TokenAlignment(
        source_words=words(" ".join(f"s{i}" for i in range(n_source))),
        target_words=words(" ".join(f"t{j}" for j in range(n_target))),
        links=rows, hard=hard, pharaoh="",
    )


def spans(pairs: list[PhrasePair]) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    return [(p.source, p.target) for p in pairs]


def test_monotone_one_to_one_links_give_one_pair_per_word():
    a = alignment(3, 3, {0: [(0, 1.0)], 1: [(1, 1.0)], 2: [(2, 1.0)]})
    assert spans(extracted_phrase_pairs(a)) == [((0, 1), (0, 1)), ((1, 2), (1, 2)), ((2, 3), (2, 3))]


def test_swapped_neighbours_stay_two_crossing_pairs():
    # "a red house" -> "ein Haus rot"-like swap: targets 1 and 2 come from sources 2 and 1; each
    # word pair is consistent on its own, so the map keeps them apart (in target order).
    a = alignment(3, 3, {0: [(0, 1.0)], 1: [(2, 1.0)], 2: [(1, 1.0)]})
    assert spans(extracted_phrase_pairs(a)) == [((0, 1), (0, 1)), ((2, 3), (1, 2)), ((1, 2), (2, 3))]


def test_two_target_words_from_one_source_word_are_one_pair():
    a = alignment(2, 3, {0: [(0, 1.0)], 1: [(0, 1.0)], 2: [(1, 1.0)]})
    assert spans(extracted_phrase_pairs(a)) == [((0, 1), (0, 2)), ((1, 2), (2, 3))]


def test_reordered_but_not_interleaved_links_stay_separate_pairs():
    a = alignment(3, 2, {0: [(2, 1.0)], 1: [(0, 1.0)]})
    assert spans(extracted_phrase_pairs(a)) == [((2, 3), (0, 1)), ((0, 1), (1, 2))]


def test_interleaved_links_close_into_one_block_with_the_words_between():
    # t0<-s0, t1<-s2, t2<-s1, t3<-s0: s0 is used at both ends, so everything is one block.
    a = alignment(3, 4, {0: [(0, 1.0)], 1: [(2, 1.0)], 2: [(1, 1.0)], 3: [(0, 1.0)]})
    assert spans(extracted_phrase_pairs(a)) == [((0, 3), (0, 4))]


def test_unaligned_target_words_are_in_no_pair():
    a = alignment(2, 3, {0: [(0, 1.0)], 2: [(1, 1.0)]})
    assert spans(extracted_phrase_pairs(a)) == [((0, 1), (0, 1)), ((1, 2), (2, 3))]
    assert extracted_phrase_pairs(alignment(2, 2, {})) == []


def test_confidence_is_the_mean_soft_mass_inside_the_source_span():
    a = alignment(3, 3, {0: [(0, 0.75), (2, 0.25)], 1: [(0, 0.6), (1, 0.4)], 2: [(2, 0.9), (0, 0.1)]})
    pairs = extracted_phrase_pairs(a)
    assert spans(pairs) == [((0, 1), (0, 2)), ((2, 3), (2, 3))]
    assert pairs[0].confidence == pytest.approx((0.75 + 0.6) / 2)
    assert pairs[1].confidence == pytest.approx(0.9)


def test_attended_pairs_merge_consecutive_words_on_the_same_source_span():
    # Source pieces: ▁Two ▁dog s ▁play (words Two, dogs, play); target: ▁Zwei ▁Hund e ▁spielen.
    source_text, target_text = "Two dogs play", "Zwei Hunde spielen"
    source_pieces, source_spans = ["▁Two", "▁dog", "s", "▁play"], [(0, 3), (4, 7), (7, 8), (9, 13)]
    target_pieces, target_spans = ["▁Zwei", "▁Hund", "e", "▁spielen"], [(0, 4), (5, 9), (9, 10), (11, 18)]
    links = [
        PhraseLink(0, 0, 3, 0.5),  # Zwei <- the trigram "Two dog s" = words 0..1
        PhraseLink(1, 0, 2, 0.4),  # Hund <- "Two dog" = words 0..1
        PhraseLink(2, 1, 2, 0.9),  # e <- "dog s" = word 1: heavier, so "Hunde" takes it
        PhraseLink(3, 3, 1, 0.8),  # spielen <- play
    ]
    pairs = attended_phrase_pairs(
        links, source_text=source_text, source_pieces=source_pieces, source_spans=source_spans,
        target_text=target_text, target_pieces=target_pieces, target_spans=target_spans,
    )
    assert pairs == [PhrasePair((0, 2), (0, 1), 0.5), PhrasePair((1, 2), (1, 2), 0.9), PhrasePair((2, 3), (2, 3), 0.8)]

    same = [PhraseLink(0, 0, 3, 0.5), PhraseLink(1, 0, 3, 0.7), PhraseLink(3, 3, 1, 0.8)]
    pairs = attended_phrase_pairs(
        same, source_text=source_text, source_pieces=source_pieces, source_spans=source_spans,
        target_text=target_text, target_pieces=target_pieces, target_spans=target_spans,
    )
    assert pairs == [PhrasePair((0, 2), (0, 2), pytest.approx(0.6)), PhrasePair((2, 3), (2, 3), 0.8)]


def test_attended_links_outside_the_source_pieces_are_ignored():
    pairs = attended_phrase_pairs(
        [PhraseLink(0, 1, 2, 0.9)], source_text="Hi", source_pieces=["▁Hi"], source_spans=[(0, 2)],
        target_text="Hallo", target_pieces=["▁Hallo"], target_spans=[(0, 5)],
    )
    assert pairs == []


def test_an_unlinked_target_word_inside_a_block_does_not_lower_its_confidence():
    # t0 and t2 both come from s0, so the block spans t0..t2 and takes in t1, which has no link
    # at all. Confidence is the mean over the block's linked target words only: (0.75 + 0.75) / 2;
    # counting t1 as 0 would give 0.5.
    a = alignment(2, 3, {0: [(0, 0.75), (1, 0.25)], 2: [(0, 0.75), (1, 0.25)]})
    (pair,) = extracted_phrase_pairs(a)
    assert (pair.source, pair.target) == ((0, 1), (0, 3))
    assert pair.confidence == 0.75


def attended(links, source=("Two dogs", ["▁Two", "▁dog", "s"], [(0, 3), (4, 7), (7, 8)]),
             target=("Zwei Hunde", ["▁Zwei", "▁Hund", "e"], [(0, 4), (5, 9), (9, 10)])):
    return attended_phrase_pairs(
        links, source_text=source[0], source_pieces=source[1], source_spans=source[2],
        target_text=target[0], target_pieces=target[1], target_spans=target[2],
    )


def test_a_link_of_the_step_after_the_last_target_piece_is_ignored():
    # The EOS step's link (target piece 3 of 3) names no target word.
    assert attended([PhraseLink(0, 0, 1, 0.7), PhraseLink(3, 1, 2, 0.9)]) == [PhrasePair((0, 1), (0, 1), 0.7)]


def test_a_link_reaching_past_the_last_source_piece_keeps_the_words_it_touches():
    # The trigram ending at the source EOS: pieces 1, 2 and the EOS position 3.
    assert attended([PhraseLink(1, 1, 3, 0.6)]) == [PhrasePair((1, 2), (1, 2), 0.6)]


def test_of_two_equally_heavy_pieces_of_a_word_the_first_decides():
    pairs = attended([PhraseLink(1, 0, 1, 0.4), PhraseLink(2, 1, 1, 0.4)])
    assert pairs == [PhrasePair((0, 1), (1, 2), 0.4)]


def test_words_that_follow_each_other_on_one_span_merge_and_a_gap_splits_them():
    source = ("a b", ["▁a", "▁b"], [(0, 1), (2, 3)])
    target = ("w x y z", ["▁w", "▁x", "▁y", "▁z"], [(0, 1), (2, 3), (4, 5), (6, 7)])
    links = [PhraseLink(0, 0, 2, 0.2), PhraseLink(1, 0, 2, 0.4), PhraseLink(3, 0, 2, 0.8)]  # y has no link
    assert attended(links, source, target) == [
        PhrasePair((0, 2), (0, 2), pytest.approx(0.3)), PhrasePair((0, 2), (3, 4), 0.8)
    ]


def test_a_later_block_that_closes_around_an_earlier_one_absorbs_it():
    # t0<-s1 alone is consistent, so it is a block first. t1<-s0 and t3<-s0 pull t2<-s2 in, whose
    # source span then covers s1 and with it t0: the second block contains the first, and the map
    # holds the larger one only (no target word in two pairs).
    a = alignment(3, 4, {0: [(1, 1.0)], 1: [(0, 1.0)], 2: [(2, 1.0)], 3: [(0, 1.0)]})
    assert spans(extracted_phrase_pairs(a)) == [((0, 3), (0, 4))]


def test_three_consecutive_words_on_one_span_are_one_attended_pair():
    source = ("a b", ["▁a", "▁b"], [(0, 1), (2, 3)])
    target = ("w x y", ["▁w", "▁x", "▁y"], [(0, 1), (2, 3), (4, 5)])
    links = [PhraseLink(0, 1, 1, 0.3), PhraseLink(1, 1, 1, 0.6), PhraseLink(2, 1, 1, 0.9)]
    assert attended(links, source, target) == [PhrasePair((1, 2), (0, 3), pytest.approx(0.6))]


def test_extracted_pairs_are_consistent_disjoint_and_cover_every_linked_word_on_random_alignments():
    import random

    rng = random.Random(7)
    for _ in range(2000):
        n_source, n_target = rng.randint(1, 7), rng.randint(1, 7)
        links = {j: [(rng.randrange(n_source), 1.0)] for j in range(n_target) if rng.random() < 0.85}
        a = alignment(n_source, n_target, links)
        pairs = extracted_phrase_pairs(a)
        for pair in pairs:
            # Consistent: every link touching the block lies wholly inside it.
            for i, j in a.hard:
                assert (pair.target[0] <= j < pair.target[1]) == (pair.source[0] <= i < pair.source[1]), (a.hard, pair)
        for first, second in zip(pairs, pairs[1:]):
            assert first.target[1] <= second.target[0]  # disjoint and in target order
        covered = sorted(j for pair in pairs for j in range(*pair.target) if a.links[j])
        assert covered == sorted(links), a.hard
