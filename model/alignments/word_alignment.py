"""Word-level token alignments from piece-level attention (docs/design.md §5).

The model attends over SentencePiece pieces, but people read words: this module merges pieces
back into words, turns the (target pieces x source pieces) attention of one hypothesis into
(target words x source words) weights, and derives the soft links, the hard links and their
Pharaoh string.

It is pure Python on purpose: it knows nothing of SentencePiece (pieces and character spans are
given), and the attention may come as a torch tensor, a numpy array or nested lists (anything
with ``tolist()`` or iterable rows), so every backend — torch, ONNX Runtime, CTranslate2 —
shares it. The matrices are one sentence long; plain loops in float64 are exact and cheap.

Conventions:
- A piece starting with "▁" (U+2581) starts a new word; the first kept piece always does.
- A piece made only of "▁" is skipped (it carries no characters), but the piece after it still
  starts a new word — SentencePiece emits a bare "▁" before pieces it cannot prefix.
- A word's character span runs from its first to its last non-empty piece span, trimmed of
  whitespace, so ``word.text == text[word.start:word.end]`` always holds. A word whose pieces
  cover no characters is dropped together with its attention.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from model.text.invisible import is_blank, is_invisible

WORD_BOUNDARY = "\u2581"
# Links lighter than this (after normalising the row to 1) are noise for a reader; the weights
# that remain are renormalised so that they still sum to 1.
DEFAULT_MIN_WEIGHT = 0.01

Span = tuple[int, int]


@dataclass(frozen=True)
class Word:
    """A word of a surface string: ``text == string[start:end]`` (character offsets)."""

    text: str
    start: int
    end: int


@dataclass(frozen=True)
class TokenAlignment:
    """Word alignment of one hypothesis.

    links[j]: the source words target word j came from, as (source index, weight), heaviest
    first, weights summing to 1 (empty when the word's attention fell only on dropped pieces).
    hard: (source index, target index) per target word that has links — its heaviest source word.
    pharaoh: ``hard`` as "i-j i-j", source first, 0-based, sorted.
    support[j]: how much some source word wants target word j: the largest p(j | i) over source
    words i, p(j | i) being source word i's share of attention over the target words; read from
    ``support_from``: "columns" (a supervised head's matrix read by columns) or "reverse" (the reverse
    model's own attention, bidirectional method). An inserted word attends to some source word, so its row says
    little; no source word gives it much of its column (service/alignment_flags.py). None: unknown.
    """

    source_words: list[Word]
    target_words: list[Word]
    links: list[list[tuple[int, float]]]
    hard: list[tuple[int, int]]
    pharaoh: str
    support: list[float] | None = None
    support_from: str | None = None

    @classmethod
    def empty(cls) -> TokenAlignment:
        """The alignment of an empty sentence pair (no words on either side)."""
        return cls(source_words=[], target_words=[], links=[], hard=[], pharaoh="")


def group_words(
    text: str, pieces: Sequence[str], spans: Sequence[Span]
) -> tuple[list[Word], list[int | None]]:
    """Merge pieces into words.

    Returns the words and, for every piece, the index of the word it belongs to (None for a
    skipped piece), which is what the attention aggregation needs.
    """
    if len(pieces) != len(spans):
        raise ValueError(f"{len(pieces)} pieces but {len(spans)} spans")
    groups: list[list[int]] = []
    new_word = True
    for k, (piece, (begin, end)) in enumerate(zip(pieces, spans)):
        if not 0 <= begin <= end <= len(text):
            raise ValueError(
                f"piece {k} ({piece!r}) has span ({begin}, {end}) outside a string of length {len(text)}"
            )
        if not piece.strip(WORD_BOUNDARY):
            new_word = True
            continue
        if new_word or piece.startswith(WORD_BOUNDARY) or not groups:
            groups.append([])
        groups[-1].append(k)
        new_word = False

    words: list[Word] = []
    owner: list[int | None] = [None] * len(pieces)
    for members in groups:
        covered = [spans[k] for k in members if spans[k][0] < spans[k][1]]
        if not covered:
            continue
        start = min(b for b, _ in covered)
        end = max(e for _, e in covered)
        # A word's span starts at its first visible character and ends after its last one or
        # that one's combining marks (model/text/invisible.py): pieces' spans carry the space and
        # any zero-width characters before them, which tokenizers normalise away.
        while start < end and is_invisible(text[start]):
            start += 1
        while end > start and is_blank(text[end - 1]):
            end -= 1
        if start == end:
            continue
        for k in members:
            owner[k] = len(words)
        words.append(Word(text=text[start:end], start=start, end=end))
    return words, owner


def _rows(attention: Any) -> list[list[float]]:
    """Any 2-D array-like -> list of float rows (tensors and arrays via ``tolist``)."""
    if hasattr(attention, "tolist"):
        attention = attention.tolist()
    return [[float(w) for w in row] for row in attention]


def word_attention(
    rows: list[list[float]],
    target_owner: list[int | None],
    source_owner: list[int | None],
    n_target: int,
    n_source: int,
    target_punctuation: Sequence[bool] = (),
    source_punctuation: Sequence[bool] = (),
) -> list[list[float]]:
    """Piece attention (T_pieces, S_pieces) -> word attention (T_words, S_words).

    Source side SUM: a target piece that attends to "▁Hau" and "s" attends to the word "Haus",
    so the word gets the total mass of its pieces (and each row stays a distribution). Target side MEAN: every
    piece of a target word is one prediction with a distribution over the source; averaging keeps
    a distribution, whereas summing would weigh long (many-piece) words more.

    `*_punctuation`: per piece, whether it is punctuation glued to a word of other pieces ("?" of
    "löschen?"). Such pieces leave the word's link out of it: the "?" of "löschen?" attends to the
    "?" of "folder?", which made "Den ausgewählten Ordner löschen?" link "löschen?" to "folder?"
    (0.52) over "Delete" (0.48). Their target rows are not averaged in, and the mass on their
    source columns is spread over the row's other words in proportion (each row keeps its total).
    """
    sums = [[0.0] * n_source for _ in range(n_target)]
    totals = [0.0] * n_target
    counts = [0] * n_target
    for t, row in enumerate(rows):
        j = target_owner[t]
        if j is None or (target_punctuation and target_punctuation[t]):
            continue
        counts[j] += 1
        acc = sums[j]
        for s, weight in enumerate(row):
            i = source_owner[s]
            if i is not None:
                totals[j] += weight
                if not (source_punctuation and source_punctuation[s]):
                    acc[i] += weight
    out = []
    for j in range(n_target):
        # Every kept word owns at least one piece that is not glued punctuation, hence one row.
        kept = sum(sums[j])
        scale = totals[j] / kept / counts[j] if kept > 0 else 1.0 / counts[j]
        out.append([w * scale for w in sums[j]])
    return out


def glued_punctuation(pieces: Sequence[str], owner: Sequence[int | None]) -> list[bool]:
    """Per piece: punctuation only, in a word that has other pieces ("?" of "löschen?"), which
    `word_attention` leaves out of the word's links."""
    punctuation = [all(unicodedata.category(c).startswith("P") for c in piece.strip(WORD_BOUNDARY)) and
                   bool(piece.strip(WORD_BOUNDARY)) for piece in pieces]
    worded = {owner[k] for k in range(len(pieces)) if owner[k] is not None and not punctuation[k]}
    return [punctuation[k] and owner[k] in worded for k in range(len(pieces))]


def soft_links(row: Sequence[float], min_weight: float = DEFAULT_MIN_WEIGHT) -> list[tuple[int, float]]:
    """One target word's source weights -> links heaviest first, summing to 1.

    The row is normalised first (rows need not sum to 1: mass on dropped pieces such as EOS or a
    bare "▁" is gone), then links under ``min_weight`` are dropped and the rest renormalised.
    The heaviest link is always kept so that every attended word has its hard link. A row with
    no positive, finite attention gives no links.
    Ties go to the lower source index, so results do not depend on float ordering noise.
    """
    if not all(math.isfinite(w) for w in row):
        return []  # a NaN/inf row (a broken model) says nothing about where the word came from
    positive = [(i, w) for i, w in enumerate(row) if w > 0.0]
    total = sum(w for _, w in positive)
    if not positive:
        return []
    probs = sorted(((i, w / total) for i, w in positive), key=lambda link: (-link[1], link[0]))
    kept = [probs[0]] + [link for link in probs[1:] if link[1] >= min_weight]
    z = sum(p for _, p in kept)
    return [(i, p / z) for i, p in kept]


def pharaoh(hard: Sequence[tuple[int, int]]) -> str:
    """Hard links as the Pharaoh format "i-j" (source-target, 0-based), sorted."""
    return " ".join(f"{i}-{j}" for i, j in sorted(hard))


def token_alignment(
    *,
    source_text: str,
    source_pieces: Sequence[str],
    source_spans: Sequence[Span],
    target_text: str,
    target_pieces: Sequence[str],
    target_spans: Sequence[Span],
    attention: Any,
    min_weight: float = DEFAULT_MIN_WEIGHT,
    symmetric: bool = False,
    link_threshold: float = 0.0,
    cognate_weight: float | None = None,
) -> TokenAlignment:
    """Word-level alignment of one hypothesis.

    ``attention`` is (len(target_pieces), len(source_pieces)): the caller drops BOS/EOS rows and
    columns first, so that row t and column s are exactly piece t and piece s. The shape is
    checked rather than guessed at, because an off-by-one here silently shifts every link.
    Spans index ``source_text`` (the user's string) and ``target_text`` (the detokenised output).
    ``symmetric``: the hard links are the word matrix read both ways and symmetrised
    (`model.alignments.symmetrisation.matrix_links`, with its ``threshold`` = ``link_threshold``), so a target
    word may have none or several; the matrix they are read from then includes the orthographic prior,
    ``cognate_weight`` × the similarity of words spelt alike (`model.alignments.cognates`; None: its
    COGNATE_WEIGHT, 0 leaves it out). The soft links stay the model's weights.
    """
    rows = _rows(attention)
    if len(rows) != len(target_pieces) or any(len(r) != len(source_pieces) for r in rows):
        widths = sorted({len(r) for r in rows})
        raise ValueError(
            f"attention has {len(rows)} rows of widths {widths}; expected "
            f"{len(target_pieces)} rows (target pieces) of width {len(source_pieces)} (source pieces)"
        )
    source_words, source_owner = group_words(source_text, source_pieces, source_spans)
    target_words, target_owner = group_words(target_text, target_pieces, target_spans)
    if not source_words:
        # Nothing to link to: every target word keeps an empty link list.
        return TokenAlignment(source_words, target_words, [[] for _ in target_words], [], "")

    weights = word_attention(rows, target_owner, source_owner, len(target_words), len(source_words),
                             glued_punctuation(target_pieces, target_owner),
                             glued_punctuation(source_pieces, source_owner))
    links = [soft_links(row, min_weight) for row in weights]
    if symmetric:
        # Pure Python too.
        from model.alignments.cognates import COGNATE_WEIGHT, with_cognates
        from model.alignments.symmetrisation import matrix_links

        read = with_cognates(weights, [w.text for w in source_words], [w.text for w in target_words],
                             COGNATE_WEIGHT if cognate_weight is None else cognate_weight)
        hard = sorted(matrix_links(read, link_threshold), key=lambda link: (link[1], link[0]))
    else:
        hard = [(row[0][0], j) for j, row in enumerate(links) if row]
    return TokenAlignment(
        source_words=source_words,
        target_words=target_words,
        links=links,
        hard=hard,
        pharaoh=pharaoh(hard),
        # Only a supervised head's matrix is read by columns: raw attention spreads a source word's
        # column over half the sentence (inserted words flagged 59 %, translating ones 37 %).
        support=column_support(weights) if symmetric else None,
        support_from="columns" if symmetric else None,
    )


def column_support(weights: Sequence[Sequence[float]]) -> list[float]:
    """Per target word (row), the largest share it has of any source word's column: each column
    normalised over the target words, then the row's maximum (0 for a column without mass)."""
    if not weights:
        return []
    columns = [sum(row[i] for row in weights) for i in range(len(weights[0]))]
    return [max((w / c for w, c in zip(row, columns) if c > 0.0), default=0.0) for row in weights]
