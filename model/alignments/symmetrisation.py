"""Symmetrising two directional word alignments: grow-diag-final and grow-diag-final-and.

Pure Python: an alignment is a set of (source word, target word) links, 0-based. Used by the
evaluation tools (training.alignment_metrics re-exports it), the alignment labels
(training.alignment_labels) and the service's bidirectional alignment (model/alignments/bidirectional.py).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

Link = tuple[int, int]  # (source word, target word), 0-based

NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def grow_diag_final(forward: Iterable[Link], reverse: Iterable[Link], final_and: bool = False) -> set[Link]:
    """Koehn's grow-diag-final (Koehn, Och & Marcu 2003; the statmt.org pseudo-code), verbatim:

        alignment = intersect(e2f, f2e)
        GROW-DIAG: repeat until a pass adds nothing:
            for e = 0..en, for f = 0..fn: if (e, f) is in alignment:
                for each neighbour (e', f') in the order (-1,0) (0,-1) (1,0) (0,1) (-1,-1) (-1,1) (1,-1) (1,1):
                    if (e' unaligned or f' unaligned) and (e', f') in union(e2f, f2e): add (e', f')
        FINAL(e2f); FINAL(f2e), where FINAL(a):
            for e' = 0..en, for f' = 0..fn:
                if (e' unaligned or f' unaligned) and (e', f') in a: add (e', f')

    Here e is the source word i, f the target word j, e2f = `forward` and f2e = `reverse`, both as
    (source, target) links. Points are added at once, so a point added in a pass is visited later
    in the same pass, and "aligned" means aligned in the alignment as it stands; only the walk
    order can change the result, which is why it is fixed above. The grid only needs to cover
    the union: no point outside it can be added.

    final_and: grow-diag-final-and (Koehn et al. 2005, the Moses default): FINAL adds a point only
    when both its words are unaligned.
    """
    e2f, f2e = set(forward), set(reverse)
    both = e2f | f2e
    alignment = e2f & f2e
    aligned_src = {i for i, _ in alignment}
    aligned_tgt = {j for _, j in alignment}

    def add(point: Link) -> None:
        alignment.add(point)
        aligned_src.add(point[0])
        aligned_tgt.add(point[1])

    if not both:
        return set()
    n_src = max(i for i, _ in both) + 1
    n_tgt = max(j for _, j in both) + 1
    added = True
    while added:
        added = False
        for e in range(n_src):
            for f in range(n_tgt):
                if (e, f) not in alignment:
                    continue
                for de, df in NEIGHBOURS:
                    point = (e + de, f + df)
                    if (point[0] not in aligned_src or point[1] not in aligned_tgt) and point in both:
                        add(point)
                        added = True
    for directional in (e2f, f2e):
        for point in sorted(directional):  # = the (e', f') grid walk restricted to the points of `a`
            unaligned = (point[0] not in aligned_src, point[1] not in aligned_tgt)
            if all(unaligned) if final_and else any(unaligned):
                add(point)
    return alignment


def grow_diag_final_and(forward: Iterable[Link], reverse: Iterable[Link]) -> set[Link]:
    """grow-diag-final-and: `grow_diag_final` whose FINAL step adds only links between two unaligned words."""
    return grow_diag_final(forward, reverse, final_and=True)


def matrix_links(weights: Sequence[Sequence[float]], threshold: float = 0.0) -> set[Link]:
    """Hard links from ONE alignment matrix, symmetrised: weights[j][i] = target word j's weight on
    source word i. Each target word's heaviest source word (the usual hard link) and each source
    word's heaviest target word (the matrix read the other way, as if by a reverse model) are
    combined by grow-diag-final-and, so that a source word that no target word prefers can still be
    linked and one that draws every target word's argmax is kept to its best ones. Rows or columns
    without positive finite mass give no link; ties go to the lower index.

    threshold: a link (i, j) is kept only if p(i | j) · p(j | i) >= threshold, p(i | j) = weights[j][i]
    (a row is the head's distribution over the source) and p(j | i) its share of column i (the
    matrix read the other way): the product of the two directions' posteriors, as in agreement-based
    alignment (Liang et al. 2006, eq. 1). A link that one direction supports only weakly is dropped;
    0 keeps every link."""
    rows = [list(map(float, row)) for row in weights]
    if not rows or not rows[0]:
        return set()  # no target words, or no source words: nothing to link
    by_target: set[Link] = set()
    for j, row in enumerate(rows):
        if row and all(math.isfinite(w) for w in row) and max(row) > 0.0:
            by_target.add((max(range(len(row)), key=lambda i: (row[i], -i)), j))
    by_source: set[Link] = set()
    for i in range(len(rows[0])):
        column = [row[i] for row in rows]
        if all(math.isfinite(w) for w in column) and max(column) > 0.0:
            by_source.add((i, max(range(len(column)), key=lambda j: (column[j], -j))))
    links = grow_diag_final_and(by_target, by_source)
    if threshold <= 0.0:
        return links
    column_mass = [sum(row[i] for row in rows) for i in range(len(rows[0]))]
    return {(i, j) for i, j in links if rows[j][i] * rows[j][i] / column_mass[i] >= threshold}
