"""Phrase links of one hypothesis from its phrase attention (the raw material of the phrase map, docs/design.md §5).

A phrasal cross-attention reports, for every target token, a weight for every source n-gram:
`phrase_attention[t, n-1, j]` is the weight of the source n-gram that starts at piece j and has
length n (`Transformer.decode_step(..., need_phrase_attention=True)`, `Hypothesis.phrase_attention` from
`model.decoding.generate`). This module turns that table into readable links. It is pure Python, like
model/alignments/word_alignment.py, so any backend's output (torch tensor, numpy array, nested lists) fits.
"""
from __future__ import annotations

from typing import Any, NamedTuple


class PhraseLink(NamedTuple):
    """Target piece `target` attended to the source pieces start .. start+length-1 with `weight`."""

    target: int
    start: int
    length: int
    weight: float


def _rows(table: Any) -> list:
    return table.tolist() if hasattr(table, "tolist") else [list(map(list, row)) for row in table]


def phrase_links(
    phrase_attention: Any, *, source_length: int | None = None, top_k: int = 1, min_weight: float = 0.0
) -> list[PhraseLink]:
    """The `top_k` heaviest source n-grams of every target piece, as (target, start, length, weight).

    phrase_attention: (T, n_max, S) for one hypothesis. source_length: keep only n-grams that lie
    within the first `source_length` pieces (e.g. the source pieces without EOS). Links lighter
    than `min_weight` are dropped. Links come target by target, heaviest first; equal weights go
    shorter-then-earlier first, so the result is deterministic.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k!r}")
    links: list[PhraseLink] = []
    for target, sizes in enumerate(_rows(phrase_attention)):
        candidates = []
        for size_index, weights in enumerate(sizes):
            length = size_index + 1
            for start, weight in enumerate(weights):
                end = start + length
                if weight <= 0.0 or weight < min_weight or (source_length is not None and end > source_length):
                    continue
                candidates.append(PhraseLink(target, start, length, float(weight)))
        candidates.sort(key=lambda link: (-link.weight, link.length, link.start))
        links.extend(candidates[:top_k])
    return links
