"""Possible omissions and insertions, read off a word alignment: hints for a reviewer, not verdicts.

A source word without a hard link may have been left untranslated (or merged into a neighbour's
translation: "in the" → "im"); where the alignment method also reads the matrix by columns (the
supervised heads' row+column links), a source word has a hard link to the target word that
attends to it most, even one that attends more to another word, and is not flagged (the software
model's "Click Apply to save" → "Klicken Sie auf, um": "Klicken" 0.76 to Click, 0.24 to Apply), so
omissions are undercounted there. A target word whose attention is spread thin, or that has no link at all, may have been made up. Attention alignments are noisy,
so each flag carries a confidence in [0, 1] and the reader decides.

- omission of source word i: no hard link (i, ·); confidence = 1 − the heaviest weight any
  target word gives i (a word some target word half-attends to is a weak hint).
- insertion of target word j: no links (confidence 1), or its heaviest link below
  INSERTION_MAX_WEIGHT; confidence = 1 − that weight.
"""
from __future__ import annotations

from dataclasses import dataclass

from service.runtime.base import TokenAlignment

# A target word whose heaviest source word has less than this share of its attention is flagged.
INSERTION_MAX_WEIGHT = 0.5


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
    linked = {s for s, _ in alignment.hard}
    heaviest = [0.0] * len(alignment.source_words)
    for row in alignment.links:
        for s, weight in row:
            heaviest[s] = max(heaviest[s], weight)
    return [Flag(i, round(1.0 - heaviest[i], 6)) for i in range(len(alignment.source_words)) if i not in linked]


def possible_insertions(alignment: TokenAlignment) -> list[Flag]:
    flags = []
    for j, row in enumerate(alignment.links):
        weight = max((w for _, w in row), default=0.0)
        if weight < INSERTION_MAX_WEIGHT:
            flags.append(Flag(j, round(1.0 - weight, 6)))
    return flags
