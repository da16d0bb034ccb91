"""Possible omissions and insertions, read off a word alignment: hints for a reviewer, not verdicts.

A source word that no target word gives more than a sliver of its attention may have been left
untranslated (or merged into a neighbour's translation: "in the" -> "im"). A target word whose
attention is spread thin, or that has no link at all, may have been made up. Attention alignments
are noisy, so each flag carries a confidence in [0, 1] and the reader decides.

- omission of source word i: the heaviest weight any target word gives i is below
  OMISSION_MAX_WEIGHT; confidence = 1 - that weight.
- insertion of target word j: no links (confidence 1), or its heaviest link below
  INSERTION_MAX_WEIGHT; confidence = 1 - that weight.

Omissions are read from the weights, not the hard links: where a method also reads the matrix by
columns (the supervised heads' and the bidirectional method's links), every source word gets a hard
link to the target word that attends to it most, however little, so an untranslated word was
linked and not flagged. Measured by deleting a word-for-word translated content word from
reference translations (`python benchmarks/omission_flags.py`, results/omission_flags.md): on
test_2016_flickr with eflomal's links the hard-link rule flagged 48.4 % of them, this one 60.2 %,
translated words flagged 1.4 / 0.7 % (content / function words) against 1.6 / 1.0 %; the
threshold was chosen there (0.3 flags 71.7 % but 3.4 % of translated content words).
"""
from __future__ import annotations

from dataclasses import dataclass

from service.runtime.base import TokenAlignment

# A target word whose heaviest source word has less than this share of its attention is flagged.
INSERTION_MAX_WEIGHT = 0.5
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
    flags = []
    for j, row in enumerate(alignment.links):
        weight = max((w for _, w in row), default=0.0)
        if weight < INSERTION_MAX_WEIGHT:
            flags.append(Flag(j, round(1.0 - weight, 6)))
    return flags
