"""Bidirectional word alignment: the forward model's links symmetrised with the reverse model's.

The forward model (source -> target) aligns its own translation; the reverse model (target ->
source) is forced to read that translation and produce the source, and aligns the other way. The
two sets of hard links are combined by grow-diag-final-and (model/alignments/symmetrisation.py): links both
directions agree on, grown along the diagonal into words neither has yet, and finally links between
two words still unaligned. Every link of the result weighs the same within its target word (the
two directions' attention weights are not on one scale).
"""
from __future__ import annotations

from model.alignments.word_alignment import TokenAlignment, pharaoh
from model.alignments.symmetrisation import grow_diag_final_and


def bidirectional_alignment(forward: TokenAlignment, reverse: TokenAlignment) -> TokenAlignment:
    """`forward` aligns (source, target); `reverse` aligns the same pair the other way round (its source
    words are `forward`'s target words). Raises ValueError when the two do not split the texts into the
    same words (then their links cannot be matched)."""
    for side, mine, theirs in (("source", forward.source_words, reverse.target_words),
                               ("target", forward.target_words, reverse.source_words)):
        if [(w.start, w.end) for w in mine] != [(w.start, w.end) for w in theirs]:
            raise ValueError(f"the two directions split the {side} text into different words")
    backward = {(j, i) for i, j in reverse.hard}  # reverse links are (its source = our target, its target)
    links = grow_diag_final_and(set(forward.hard), backward)
    by_target: list[list[int]] = [[] for _ in forward.target_words]
    for i, j in sorted(links):
        by_target[j].append(i)
    soft = [[(i, 1.0 / len(sources)) for i in sources] for sources in by_target]
    return TokenAlignment(forward.source_words, forward.target_words, soft, sorted(links, key=lambda l: (l[1], l[0])),
                          pharaoh(links))
