"""Phrase maps: contiguous source word spans paired with target word spans (docs/design.md §5).

Two ways to get them, both from what any backend already returns:

- ``extracted_phrase_pairs``: from a word alignment (the token map). The pairs are the smallest
  blocks *consistent* with the hard links (Och & Ney 2004; Koehn et al. 2003): no link leaves a
  block, so every target word of a pair came from inside its source span and no source word of
  the span went elsewhere. Crossing links merge into one larger block, which is the truth about
  them. Works for every model, CTranslate2 included.
- ``attended_phrase_pairs``: from a phrasal model's own phrase attention (which source n-gram or
  chunk each target piece attended to; ``model.alignments.attention_phrases.phrase_links``). Consecutive target words
  that chose the same source span form one pair. These spans may overlap and cross: they are
  what the attention chose, not a segmentation.

Spans are word indices, half-open, into ``TokenAlignment.source_words`` / ``target_words``;
character offsets come from those words. Pure Python, like model/alignments/word_alignment.py.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from model.alignments.word_alignment import TokenAlignment, group_words
from model.alignments.attention_phrases import PhraseLink

Span = tuple[int, int]
PhraseOrigin = Literal["extracted", "attention"]


@dataclass(frozen=True)
class PhrasePair:
    """Source words [source[0], source[1]) produced target words [target[0], target[1]).

    confidence: for an extracted pair, the mean over its target words of their soft-link weight
    that falls inside the source span; for an attended pair, the mean attention weight of the
    chosen source span over the pair's target pieces.
    """

    source: Span
    target: Span
    confidence: float


@dataclass(frozen=True)
class PhraseMap:
    """The phrase pairs of one hypothesis and where they came from ("attention": the model's
    own phrase attention; "extracted": consistent extraction from the word alignment)."""

    origin: PhraseOrigin
    pairs: list[PhrasePair]


def _close(target: Span, source: Span, source_of: dict[int, int]) -> tuple[Span, Span]:
    """Grow (target, source) until no hard link leaves it (the consistency closure)."""
    while True:
        linked = [i for j, i in source_of.items() if target[0] <= j < target[1]]
        new_source = (min([source[0], *linked]), max([source[1], *(i + 1 for i in linked)]))
        into = [j for j, i in source_of.items() if new_source[0] <= i < new_source[1]]
        new_target = (min([target[0], *into]), max([target[1], *(j + 1 for j in into)]))
        if (new_target, new_source) == (target, source):
            return target, source
        target, source = new_target, new_source


def extracted_phrase_pairs(alignment: TokenAlignment) -> list[PhrasePair]:
    """The minimal phrase pairs consistent with ``alignment.hard``, in target order.

    Every target word with a link lies in exactly one pair; a target word without links lies in
    none unless a block spans it. Blocks that would overlap on either side are merged and closed
    again, so the pairs never share a word.
    """
    source_of = {j: i for i, j in alignment.hard}
    blocks: list[tuple[Span, Span]] = []
    for j in sorted(source_of):
        if any(t[0] <= j < t[1] for t, _ in blocks):
            continue
        block = _close((j, j + 1), (source_of[j], source_of[j] + 1), source_of)
        # A new block that overlaps earlier ones on either side absorbs them.
        while True:
            overlapping = [b for b in blocks if _overlaps(b[0], block[0]) or _overlaps(b[1], block[1])]
            if not overlapping:
                break
            for b in overlapping:
                blocks.remove(b)
            spans = overlapping + [block]
            block = _close(
                (min(t[0] for t, _ in spans), max(t[1] for t, _ in spans)),
                (min(s[0] for _, s in spans), max(s[1] for _, s in spans)),
                source_of,
            )
        blocks.append(block)
    blocks.sort()
    return [PhrasePair(source, target, _inside_mass(alignment, target, source)) for target, source in blocks]


def _overlaps(a: Span, b: Span) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _inside_mass(alignment: TokenAlignment, target: Span, source: Span) -> float:
    masses = [
        sum(weight for i, weight in alignment.links[j] if source[0] <= i < source[1])
        for j in range(target[0], target[1])
        if alignment.links[j]
    ]
    return sum(masses) / len(masses) if masses else 0.0


def attended_phrase_pairs(
    links: Sequence[PhraseLink],
    *,
    source_text: str,
    source_pieces: Sequence[str],
    source_spans: Sequence[Span],
    target_text: str,
    target_pieces: Sequence[str],
    target_spans: Sequence[Span],
) -> list[PhrasePair]:
    """Word-level pairs from piece-level phrase links (one heaviest link per target piece).

    A target word takes the link of its heaviest piece; a source piece span becomes the words
    it touches. Consecutive target words with the same source span merge into one pair whose
    confidence is the mean link weight.
    """
    _, source_owner = group_words(source_text, source_pieces, source_spans)
    _, target_owner = group_words(target_text, target_pieces, target_spans)
    best: dict[int, tuple[float, Span]] = {}  # target word -> (weight, source word span)
    for link in links:
        word = target_owner[link.target] if link.target < len(target_owner) else None
        owners = [source_owner[k] for k in range(link.start, link.start + link.length) if k < len(source_owner)]
        owners = [o for o in owners if o is not None]
        if word is None or not owners:
            continue
        span = (min(owners), max(owners) + 1)
        if word not in best or link.weight > best[word][0]:
            best[word] = (link.weight, span)
    pairs: list[PhrasePair] = []
    run: list[tuple[int, float]] = []  # (target word, weight) of the current pair
    run_span: Span | None = None
    for word in sorted(best):
        weight, span = best[word]
        if run and span == run_span and word == run[-1][0] + 1:
            run.append((word, weight))
            continue
        if run:
            pairs.append(_pair(run, run_span))
        run, run_span = [(word, weight)], span
    if run:
        pairs.append(_pair(run, run_span))
    return pairs


def _pair(run: list[tuple[int, float]], source: Span | None) -> PhrasePair:
    assert source is not None
    return PhrasePair(source, (run[0][0], run[-1][0] + 1), sum(w for _, w in run) / len(run))
