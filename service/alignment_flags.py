"""Possible omissions and insertions, read off a word alignment: hints for a reviewer, not verdicts.

A source word that no target word gives more than a sliver of its attention may have been left
untranslated (or merged into a neighbour's translation: "in the" -> "im"). A target word that no
source word gives much of its attention, or that has no link at all, may have been made up. Attention alignments
are noisy, so each flag carries a confidence in [0, 1] and the reader decides.

- omission of source word i: the heaviest weight any target word gives i is below
  OMISSION_MAX_WEIGHT; confidence = 1 - that weight.
- insertion of target word j: no links (confidence 1), or no source word that wants it: its
  support (the largest share any source word's attention over the target words gives it, p(j | i);
  `TokenAlignment.support`) below INSERTION_MAX_SUPPORT for how it was read; confidence = 1 - that
  support. Where the support is unknown, its heaviest link below INSERTION_MAX_WEIGHT.

Omissions are read from the weights, not the hard links: where a method also reads the matrix by
columns (the supervised heads' and the bidirectional method's links), every source word gets a hard
link to the target word that attends to it most, however little, so an untranslated word was
linked and not flagged. Measured by deleting a word-for-word translated content word from
reference translations (`python benchmarks/omission_flags.py`, results/omission_flags.md): on
test_2016_flickr with eflomal's links the hard-link rule flagged 48.4 % of them, this one 60.2 %,
translated words flagged 1.4 / 0.7 % (content / function words) against 1.6 / 1.0 %; the
threshold was chosen there (0.3 flags 71.7 % but 3.4 % of translated content words).

Insertions are read from the columns, not the rows: a word that translates nothing still attends to
some source word (a row is a distribution), but no source word gives it much of its own attention.
Measured by inserting a word of another reference into reference translations (`python
benchmarks/omission_flags.py --kind insertions`): in domain the row rule flagged 23.4 % of them
(bidirectional method) and 36.2 % (the software model's head), the support 56.5 % (the reverse
model's) and 53.6 % (columns), translated content words flagged 6.7 → 3.9 % and 7.5 → 4.6 %
(results/omission_flags.md). The two readings need their own thresholds, each chosen there: the
reverse model is sharp, a matrix read by columns spreads a source word over every target word that
attends to it (0.2 on the software model's columns flags 1.4 % of inserted words, on the reverse
model's 56.5 %).
"""
from __future__ import annotations

from dataclasses import dataclass

from service.runtime.base import TokenAlignment

# A target word whose heaviest source word has less than this share of its attention is flagged
# (where its support is unknown).
INSERTION_MAX_WEIGHT = 0.5
# A target word no source word gives this share of its attention is flagged, per reading of the support.
INSERTION_MAX_SUPPORT = {"reverse": 0.2, "columns": 0.4}
# A source word that no target word gives this much of its attention is flagged (module docstring).
OMISSION_MAX_WEIGHT = 0.2


@dataclass(frozen=True)
class Flag:
    word: int          # source word index (omission) or target word index (insertion)
    confidence: float


@dataclass(frozen=True)
class AlignmentFlags:
    omissions: list[Flag]   # source words
    insertions: list[Flag]  # target words


def alignment_flags(alignment: TokenAlignment) -> AlignmentFlags:
    return AlignmentFlags(possible_omissions(alignment), possible_insertions(alignment))


def possible_omissions(alignment: TokenAlignment) -> list[Flag]:
    heaviest = [0.0] * len(alignment.source_words)
    for row in alignment.links:
        for s, weight in row:
            heaviest[s] = max(heaviest[s], weight)
    return [Flag(i, round(1.0 - weight, 6)) for i, weight in enumerate(heaviest) if weight < OMISSION_MAX_WEIGHT]


def possible_insertions(alignment: TokenAlignment) -> list[Flag]:
    threshold = INSERTION_MAX_SUPPORT.get(alignment.support_from or "")
    flags = []
    for j, row in enumerate(alignment.links):
        if not row:
            flags.append(Flag(j, 1.0))
            continue
        if threshold is not None and alignment.support is not None:
            weight, limit = alignment.support[j], threshold
        else:
            weight, limit = max(w for _, w in row), INSERTION_MAX_WEIGHT
        if weight < limit:
            flags.append(Flag(j, round(1.0 - weight, 6)))
    return flags
