"""benchmarks/omission_flags.py's test cases, by hand: which reference words it deletes."""
from __future__ import annotations

from benchmarks import omission_flags
from benchmarks.omission_flags import deletions, read_gold


def test_only_word_for_word_content_links_are_deleted(monkeypatch):
    monkeypatch.setattr(omission_flags, "frequent_words", lambda: {"a", "the", "in"})
    pairs = [(["A", "dog", "runs", "in", "the", "park", "."], ["Ein", "Hund", "rennt", "im", "Park", "."],
              # "A"-"Ein": frequent; "in"/"the" share "im"; "runs" has two links; "." is not a word.
              {(0, 0), (1, 1), (2, 2), (2, 3), (3, 3), (4, 3), (5, 4), (6, 5)})]
    assert sorted(deletions(pairs, per_pair=5, seed=1)) == [(0, 1, 1), (0, 5, 4)]
    assert len(deletions(pairs, per_pair=1, seed=1)) == 1


def test_gold_links_are_read_as_english_german():
    source, target, links = read_gold(1)[0]
    assert (source[0], target[0]) == ("mr", "herr")
    # de-en.wa line 1 starts "0-0 1-1 2-2 4-3": German 4 ("herr") - English 3 ("commissioner").
    assert (3, 4) in links and (source[3], target[4]) == ("commissioner", "kommissar")


def test_inserted_words_come_from_other_references_and_never_repeat_one_of_this_ones():
    pairs = [(["a"], ["Ein", "Hund", "rennt"], set()), (["b"], ["Eine", "Katze", "schläft"], set())]
    cases = omission_flags.insertions(pairs, per_pair=3, seed=1)
    assert len(cases) == 6
    for k, position, word in cases:
        assert word not in pairs[k][1] and 1 <= position <= len(pairs[k][1])
        # Words of four letters or more, from the set's references: here the other pair's.
        assert word in {"Hund", "rennt", "Eine", "Katze", "schläft"} - set(pairs[k][1])
