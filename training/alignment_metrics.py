"""Word-alignment sets and their scores: gold files, precision / recall / AER, symmetrisation.

Pure Python, no torch: an alignment is a set of links (i, j), i a 0-based SOURCE word index and
j a 0-based TARGET word index, whatever order a file writes them in. Words are the
whitespace-separated tokens of the sentence files.

Gold formats (one sentence pair per line in Pharaoh, one link per line in NAACL):
- Pharaoh: ``i-j`` is a sure link; ``i-jp``, ``ipj`` (the lilt/alignment-scripts convention) and
  ``i?j`` are possible links. Indices 0-based unless told otherwise.
- NAACL / WPT 2003-2005: ``sent i j [S|P] [confidence]``; no S|P means S; with 1-based indices
  (their convention) position 0 is the NULL word and such links are dropped, and the sentence
  number is 1-based too.
Sure links are always possible links as well (S ⊆ P), as the AER definition needs.

AER (Och & Ney 2003), with counts summed over the corpus before dividing:
    precision = |A∩P| / |A|,  recall = |A∩S| / |S|,  AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Link = tuple[int, int]  # (source word, target word), 0-based


class AlignmentInputError(ValueError):
    """A gold or alignment file that cannot be read as it claims to be; the message names the line."""


@dataclass(frozen=True)
class GoldAlignment:
    """One sentence pair's gold links: sure ⊆ possible."""

    sure: frozenset[Link]
    possible: frozenset[Link]

    @classmethod
    def of(cls, sure: Iterable[Link], possible: Iterable[Link] = ()) -> GoldAlignment:
        sure = frozenset(sure)
        return cls(sure, sure | frozenset(possible))


# -- parsing ------------------------------------------------------------------------------------
_PHARAOH = re.compile(r"^(\d+)([-?pP])(\d+)([pP]?)$")
_NAACL = re.compile(r"^\d+\s+\d+\s+\d+(\s+[SPsp])?(\s+[-+0-9.eE]+)?$")
FORMATS = ("pharaoh", "naacl")
# The base each format is written in unless told otherwise.
DEFAULT_BASE = {"pharaoh": 0, "naacl": 1}


def detect_format(lines: Sequence[str]) -> str:
    """"naacl" when the first non-blank line is ``sent i j [S|P] [conf]``, else "pharaoh".

    The two cannot be confused: a Pharaoh link always has a separator between its numbers.
    """
    for line in lines:
        if line.strip():
            return "naacl" if _NAACL.match(line.strip()) else "pharaoh"
    return "pharaoh"


def parse_pharaoh_line(line: str, base: int = 0, reverse: bool = False, where: str = "line") -> GoldAlignment:
    """One Pharaoh line -> its sure and possible links (reverse: the file writes target-source)."""
    sure: set[Link] = set()
    possible: set[Link] = set()
    for token in line.split():
        match = _PHARAOH.match(token)
        if match is None:
            raise AlignmentInputError(f"{where}: {token!r} is not a link (i-j, i-jp, ipj or i?j)")
        a, b = int(match.group(1)) - base, int(match.group(3)) - base
        if a < 0 or b < 0:
            raise AlignmentInputError(f"{where}: link {token!r} has an index below {base} (indices are {base}-based)")
        link = (b, a) if reverse else (a, b)
        is_possible = match.group(2) != "-" or match.group(4) != ""
        (possible if is_possible else sure).add(link)
    return GoldAlignment.of(sure, possible)


def parse_naacl(
    lines: Sequence[str], n_sentences: int, base: int = 1, reverse: bool = False, name: str = "gold"
) -> list[GoldAlignment]:
    """``sent i j [S|P] [confidence]`` lines -> one GoldAlignment per sentence (absent ones empty)."""
    sure: list[set[Link]] = [set() for _ in range(n_sentences)]
    possible: list[set[Link]] = [set() for _ in range(n_sentences)]
    for number, line in enumerate(lines, start=1):
        fields = line.split()
        if not fields:
            continue
        if not _NAACL.match(line.strip()):
            raise AlignmentInputError(f"{name} line {number}: {line.strip()!r} is not 'sent i j [S|P] [confidence]'")
        sentence, a, b = (int(f) for f in fields[:3])
        kind = fields[3].upper() if len(fields) > 3 and fields[3].upper() in ("S", "P") else "S"
        if sentence - base < 0 or sentence - base >= n_sentences:
            raise AlignmentInputError(
                f"{name} line {number}: sentence {sentence} is outside the {n_sentences} sentences "
                f"of the text files ({base}-based)")
        if base == 1 and (a == 0 or b == 0):
            continue  # a link to the NULL word: not a word-to-word link
        if a < base or b < base:
            raise AlignmentInputError(f"{name} line {number}: index below {base} (indices are {base}-based)")
        link = (b - base, a - base) if reverse else (a - base, b - base)
        (sure if kind == "S" else possible)[sentence - base].add(link)
    return [GoldAlignment.of(s, p) for s, p in zip(sure, possible)]


def read_gold(
    lines: Sequence[str],
    n_sentences: int,
    fmt: str = "auto",
    base: int | None = None,
    reverse: bool = False,
    name: str = "gold",
) -> tuple[list[GoldAlignment], str, int]:
    """Gold lines -> (one GoldAlignment per sentence, the format read, the base used)."""
    if fmt == "auto":
        fmt = detect_format(lines)
    if fmt not in FORMATS:
        raise AlignmentInputError(f"unknown gold format {fmt!r} (expected auto, {' or '.join(FORMATS)})")
    base = DEFAULT_BASE[fmt] if base is None else base
    if base not in (0, 1):
        raise AlignmentInputError(f"the gold base must be 0 or 1, got {base}")
    if fmt == "naacl":
        return parse_naacl(lines, n_sentences, base, reverse, name), fmt, base
    lines = list(lines)
    if len(lines) != n_sentences:
        raise AlignmentInputError(
            f"{name} has {len(lines)} lines but the text files have {n_sentences} sentences")
    gold = [parse_pharaoh_line(line, base, reverse, f"{name} line {k}") for k, line in enumerate(lines, start=1)]
    return gold, fmt, base


def parse_links(line: str, where: str = "line") -> set[Link]:
    """A plain Pharaoh line of sure links (an aligner's output) -> its links."""
    gold = parse_pharaoh_line(line, 0, False, where)
    if gold.possible != gold.sure:
        raise AlignmentInputError(f"{where}: an aligner's output has no possible links")
    return set(gold.sure)


def pharaoh(links: Iterable[Link]) -> str:
    """Links as "i-j i-j", source first, sorted."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def check_bounds(
    alignments: Sequence[GoldAlignment], source_lengths: Sequence[int], target_lengths: Sequence[int],
    base: int = 0, name: str = "gold",
) -> None:
    """Every link inside its sentence pair; the error names the sentence (by its line in the text files)
    and the link (in the gold file's base)."""
    for k, (gold, n_src, n_tgt) in enumerate(zip(alignments, source_lengths, target_lengths)):
        for i, j in sorted(gold.possible):
            if i >= n_src or j >= n_tgt:
                raise AlignmentInputError(
                    f"{name}: sentence {k + 1} (line {k + 1} of the text files): link {i + base}-{j + base} "
                    f"(source-target, {base}-based) "
                    f"is outside a pair of {n_src} source and {n_tgt} target words")


# -- scores ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Counts:
    """Corpus totals: |A|, |S|, |P|, |A∩S|, |A∩P|. Undefined ratios (a zero denominator) are None."""

    links: int = 0
    sure: int = 0
    possible: int = 0
    hits_sure: int = 0
    hits_possible: int = 0

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.links + other.links, self.sure + other.sure, self.possible + other.possible,
                      self.hits_sure + other.hits_sure, self.hits_possible + other.hits_possible)

    @property
    def precision(self) -> float | None:
        return self.hits_possible / self.links if self.links else None

    @property
    def recall(self) -> float | None:
        return self.hits_sure / self.sure if self.sure else None

    @property
    def aer(self) -> float | None:
        """Och & Ney (2003): 1 − (|A∩S| + |A∩P|) / (|A| + |S|)."""
        total = self.links + self.sure
        return 1.0 - (self.hits_sure + self.hits_possible) / total if total else None

    def to_dict(self) -> dict[str, float | int | None]:
        return {"links": self.links, "sure": self.sure, "possible": self.possible,
                "hits_sure": self.hits_sure, "hits_possible": self.hits_possible,
                "precision": self.precision, "recall": self.recall, "aer": self.aer}


def sentence_counts(predicted: Iterable[Link], gold: GoldAlignment) -> Counts:
    a = set(predicted)
    return Counts(len(a), len(gold.sure), len(gold.possible), len(a & gold.sure), len(a & gold.possible))


def score(predicted: Sequence[Iterable[Link]], gold: Sequence[GoldAlignment]) -> Counts:
    """Corpus counts of predicted alignments against gold, sentence by sentence."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted alignments but {len(gold)} gold ones")
    total = Counts()
    for a, g in zip(predicted, gold):
        total = total + sentence_counts(a, g)
    return total


# -- symmetrisation ------------------------------------------------------------------------------
# grow-diag-final(-and) lives in model/alignments/symmetrisation.py: the service symmetrises too.
from model.alignments.symmetrisation import grow_diag_final, grow_diag_final_and  # noqa: E402,F401


def transpose(links: Iterable[Link]) -> set[Link]:
    """A reverse-direction model's (its source = our target) links -> (source, target) links."""
    return {(j, i) for i, j in links}


def intersection(forward: Iterable[Link], reverse: Iterable[Link]) -> set[Link]:
    return set(forward) & set(reverse)


def union(forward: Iterable[Link], reverse: Iterable[Link]) -> set[Link]:
    return set(forward) | set(reverse)


def diagonal(n_source: int, n_target: int) -> set[Link]:
    """A baseline with no model: target word j links to the source word at the same relative position."""
    if n_source == 0:
        return set()
    return {(min(n_source - 1, int((j + 0.5) * n_source / n_target)), j) for j in range(n_target)}
