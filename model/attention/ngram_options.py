"""The options schema of the n-gram attention kinds (`convkv`, `queryk`), validated in full.

    {"kind": "queryk", "options": {"structure": "heterogeneous", "ngrams": [1, 2, 3]}}
    {"kind": "convkv", "options": {"structure": "homogeneous", "ngrams": [1, 2], "heads_per_ngram": [2, 2]}}
    {"kind": "convkv", "options": {"structure": "interleaved", "edge": "inside"}}

- structure (required): "homogeneous" (heads divided among the n-gram sizes, §3.2.1),
  "heterogeneous" (every head attends to all sizes under one softmax, §3.2.2) or
  "interleaved" (n-gram queries too; unigram and bigram outputs merged by a strided conv, §3.3).
- ngrams: increasing n-gram sizes in [1, MAX_NGRAM]; default [1, 2]. Interleaved needs [1, 2].
- heads_per_ngram (homogeneous only): heads per size, summing to the model's n_heads; default
  an even split.
- edge: whether the n-grams that reach before the first token exist (model/attention/ngram_windows.py):
  "padded": they do, their missing rows being the convolution's zero left padding: every
    source position has a key of every size (eq. 5-6 with the left padding that §3.2.1 says the
    homogeneous structure requires), and n-gram queries at the sentence start are computed
    like any other;
  "inside": only n-grams lying wholly on real tokens exist: source keys reaching before
    position 0 are masked, and n-gram queries reaching before it give a zero row. For the
    interleaved structure this is §3.3's I_dec = (0, u_1, b_1, …): the decoder's first merge
    window holds a zero slot where a bigram would be, and the encoder's first bigram slot is 0 too.
  Default: the paper's form for the structure (`PAPER_EDGE`): "padded" for homogeneous,
  "inside" for heterogeneous and interleaved. Decoder self-attention keys are unaffected (their
  windows before position 0 stand for "before BOS" and always exist).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STRUCTURES = ("homogeneous", "heterogeneous", "interleaved")
OPTIONS = ("edge", "heads_per_ngram", "ngrams", "structure")
EDGES = ("padded", "inside")
# The edge rule of each structure as "Phrase-Based Attentions" states it (§3.2.1: homogeneous
# heads need left-padded keys and values; §3.3: the interleaved decoder sequence I_dec starts with 0).
PAPER_EDGE = {"homogeneous": "padded", "heterogeneous": "inside", "interleaved": "inside"}
DEFAULT_NGRAMS = (1, 2)
MAX_NGRAM = 8


@dataclass(frozen=True)
class HeadGroup:
    """Consecutive heads that attend to the same n-gram sizes under one softmax."""

    heads: int
    ngrams: tuple[int, ...]


@dataclass(frozen=True)
class NgramSpec:
    structure: str
    ngrams: tuple[int, ...]
    groups: tuple[HeadGroup, ...]
    edge: str = "inside"

    @property
    def n_max(self) -> int:
        return max(self.ngrams)

    @property
    def interleaved(self) -> bool:
        return self.structure == "interleaved"

    @property
    def padded_edge(self) -> bool:
        return self.edge == "padded"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate_ngram_options(kind: str, options: dict[str, Any], site: str) -> list[str]:
    """Every problem with `options` that does not depend on the model's size."""
    where = f"{site}: attention kind {kind!r}"
    problems: list[str] = []
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        problems.append(f"{where}: unknown option(s) {unknown}; known options: {', '.join(OPTIONS)}")
    structure = options.get("structure")
    if "structure" not in options:
        problems.append(f"{where}: option 'structure' is required, one of {', '.join(STRUCTURES)}")
    elif structure not in STRUCTURES:
        problems.append(f"{where}: structure must be one of {', '.join(STRUCTURES)}, got {structure!r}")
    ngrams = options.get("ngrams", list(DEFAULT_NGRAMS))
    ngrams_ok = (
        isinstance(ngrams, (list, tuple)) and len(ngrams) > 0 and all(_is_int(n) and 1 <= n <= MAX_NGRAM for n in ngrams)
        and all(a < b for a, b in zip(ngrams, ngrams[1:]))
    )
    if not ngrams_ok:
        problems.append(f"{where}: ngrams must be a non-empty list of increasing integers in [1, {MAX_NGRAM}], got {ngrams!r}")
    elif structure == "interleaved" and list(ngrams) != [1, 2]:
        problems.append(
            f"{where}: structure 'interleaved' needs ngrams [1, 2] (it interleaves unigram and bigram outputs), "
            f"got {list(ngrams)!r}"
        )
    if "edge" in options and options["edge"] not in EDGES:
        problems.append(f"{where}: edge must be one of {', '.join(EDGES)}, got {options['edge']!r}")
    if "heads_per_ngram" in options:
        split = options["heads_per_ngram"]
        if structure in STRUCTURES and structure != "homogeneous":
            problems.append(f"{where}: heads_per_ngram is only for structure 'homogeneous', got it with {structure!r}")
        elif ngrams_ok and not (
            isinstance(split, (list, tuple)) and len(split) == len(ngrams) and all(_is_int(h) and h > 0 for h in split)
        ):
            problems.append(
                f"{where}: heads_per_ngram must list a positive number of heads for each of the "
                f"{len(ngrams)} n-gram sizes, got {split!r}"
            )
    return problems


def validate_ngram_for_model(kind: str, options: dict[str, Any], site: str, n_heads: int) -> list[str]:
    """The problems that need the model's head count (options already valid on their own)."""
    if options["structure"] != "homogeneous":
        return []
    where = f"{site}: attention kind {kind!r}"
    ngrams = list(options.get("ngrams", DEFAULT_NGRAMS))
    if "heads_per_ngram" in options:
        split = list(options["heads_per_ngram"])
        if sum(split) != n_heads:
            return [f"{where}: heads_per_ngram {split} sums to {sum(split)}, but the model has n_heads = {n_heads}"]
        return []
    if n_heads % len(ngrams):
        return [f"{where}: n_heads = {n_heads} cannot be split evenly among {len(ngrams)} n-gram sizes; give heads_per_ngram"]
    return []


def ngram_spec(options: dict[str, Any], n_heads: int) -> NgramSpec:
    """The head layout of valid options (see `validate_ngram_options`)."""
    structure = options["structure"]
    ngrams = tuple(options.get("ngrams", DEFAULT_NGRAMS))
    if structure == "homogeneous":
        split = options.get("heads_per_ngram") or [n_heads // len(ngrams)] * len(ngrams)
        groups = tuple(HeadGroup(h, (n,)) for h, n in zip(split, ngrams))
    else:
        groups = (HeadGroup(n_heads, ngrams),)
    return NgramSpec(structure, ngrams, groups, options.get("edge", PAPER_EDGE[structure]))
