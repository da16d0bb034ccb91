"""Phrase links from one hypothesis' phrase attention."""
import pytest
import torch

from model.alignments.attention_phrases import PhraseLink, phrase_links

# T = 2 target pieces, n_max = 2, S = 3 source pieces (the last is EOS).
TABLE = torch.tensor([
    [[0.1, 0.0, 0.1], [0.7, 0.1, 0.0]],  # target 0: the bigram (0, 1) dominates
    [[0.0, 0.5, 0.2], [0.0, 0.3, 0.0]],  # target 1: the unigram 1, then the bigram (1, 2) that covers EOS
])


def test_the_heaviest_ngram_of_each_target():
    assert phrase_links(TABLE) == [PhraseLink(0, 0, 2, pytest.approx(0.7)), PhraseLink(1, 1, 1, 0.5)]


def test_top_k_min_weight_and_source_length():
    links = phrase_links(TABLE, top_k=3, min_weight=0.15, source_length=2)
    # EOS (piece 2) and the bigram (1, 2) that covers it lie past the source length: dropped.
    assert links == [PhraseLink(0, 0, 2, pytest.approx(0.7)), PhraseLink(1, 1, 1, 0.5)]
    assert phrase_links(TABLE.tolist(), top_k=2) == [
        PhraseLink(0, 0, 2, pytest.approx(0.7)), PhraseLink(0, 0, 1, pytest.approx(0.1)),
        PhraseLink(1, 1, 1, 0.5), PhraseLink(1, 1, 2, pytest.approx(0.3)),
    ]


def test_ties_go_shorter_then_earlier_and_top_k_is_checked():
    table = [[[0.25, 0.25], [0.25, 0.25]]]
    assert [(l.start, l.length) for l in phrase_links(table, top_k=4)] == [(0, 1), (1, 1), (0, 2), (1, 2)]
    with pytest.raises(ValueError, match="top_k must be >= 1, got 0"):
        phrase_links(table, top_k=0)
