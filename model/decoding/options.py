"""How to decode: the one options type that a request builds, the service passes on and the search
reads (beam, n-best, length, ranking, and which alignment the caller wants, hence which attention
rows the search keeps). It checks its own rules, so every reader can trust it; bounds that only
serve to protect a server (the largest beam a client may ask for) are the HTTP schema's
(service/schemas.py).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal, get_args

from model.decoding import defaults
from model.decoding.length_penalty import FORMS as LENGTH_PENALTY_FORMS, form_problem

# "token": a word alignment per hypothesis; "phrase": that and the phrase map (which is built from
# it, or from the model's phrase attention).
AlignmentMode = Literal["none", "token", "phrase"]
ALIGNMENT_MODES: tuple[str, ...] = get_args(AlignmentMode)
# Where a word alignment comes from (docs/alignment.md): "attention" the alignment layer's heads
# averaged at the step that predicts each word; "shift" the same attention at the step that reads
# it (shift-att); "supervised" the supervised alignment head (model/supervised_alignment.py) at the
# step that reads it; "bidirectional" the forward links symmetrised with the reverse model's forced
# alignment (the service's Translator does it, when both directions of the pair are served).
AlignmentMethod = Literal["attention", "shift", "supervised", "bidirectional"]
ALIGNMENT_METHODS: tuple[str, ...] = get_args(AlignmentMethod)


@dataclass(frozen=True)
class MethodRows:
    """The attention rows that align target token k under one method: ``name``'s row at step
    ``k + offset``, where step 0 reads BOS and predicts token 0 (so offset 1 is the step that reads
    token k; the last token's is the step that predicts EOS)."""

    name: Literal["attention", "supervised_attention"]
    offset: int


# The method -> rows mapping, for a search's hypotheses and a forced pass alike ("bidirectional"
# is two single-direction methods combined, so it has no rows of its own).
METHOD_ROWS: dict[str, MethodRows] = {
    "attention": MethodRows("attention", 0),
    "shift": MethodRows("attention", 1),
    "supervised": MethodRows("supervised_attention", 1),
}


def _is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def n_best_problem(n_best: int, beam_size: int) -> str | None:
    """Why ``n_best`` cannot be served with ``beam_size`` (None when it can): a search finishes at
    most beam_size hypotheses per text."""
    if 1 <= n_best <= max(beam_size, 1):
        return None
    return f"n_best must be in 1..beam_size ({beam_size}), got {n_best}"


@dataclass(frozen=True)
class DecodingOptions:
    """How to decode one batch.

    max_length_ratio / max_length_offset: a hypothesis may have at most
    ``ceil(max_length_ratio * source tokens) + max_length_offset`` target tokens (EOS excluded);
    a ratio of 0 makes the offset a fixed limit (the server's settings ask for a ratio above 0).
    length_penalty: score = log_prob / lp(len), len counting EOS, lp = len ** length_penalty for
    length_penalty_form "power", ((5 + len) / 6) ** length_penalty for "gnmt"
    (model/decoding/length_penalty.py); 0 ranks by raw log-prob.
    alignment_method: None leaves the choice to the server (the Translator names one before a
    runtime sees the options); where nothing names one, "attention".
    return_phrase_attention: also keep each hypothesis' phrase attention (a runtime sets it when
    its model attends to phrases itself; the exporter's checks set it to compare backends); only
    with alignment "phrase".
    """

    beam_size: int = defaults.BEAM_SIZE
    n_best: int = defaults.N_BEST
    length_penalty: float = defaults.LENGTH_PENALTY
    length_penalty_form: str = defaults.LENGTH_PENALTY_FORM
    max_length_ratio: float = defaults.MAX_LENGTH_RATIO
    max_length_offset: int = defaults.MAX_LENGTH_OFFSET
    alignment: AlignmentMode = "none"
    alignment_method: AlignmentMethod | None = None
    return_phrase_attention: bool = False

    def __post_init__(self) -> None:
        problems = []
        if not _is_integer(self.beam_size) or self.beam_size < 1:
            problems.append(f"beam_size must be an integer >= 1, got {self.beam_size!r}")
        if not _is_integer(self.n_best):
            problems.append(f"n_best must be an integer, got {self.n_best!r}")
        elif (n_best := n_best_problem(self.n_best, self.beam_size)) is not None:
            problems.append(n_best)
        if self.alignment not in ALIGNMENT_MODES:
            problems.append(f"alignment must be one of {ALIGNMENT_MODES}, got {self.alignment!r}")
        if self.alignment_method is not None and self.alignment_method not in ALIGNMENT_METHODS:
            problems.append(f"alignment_method must be one of {ALIGNMENT_METHODS}, got {self.alignment_method!r}")
        if self.max_length_ratio < 0:
            problems.append(f"max_length_ratio must be >= 0, got {self.max_length_ratio}")
        if self.max_length_offset < 0:
            problems.append(f"max_length_offset must be >= 0, got {self.max_length_offset}")
        if self.length_penalty < 0:
            problems.append(f"length_penalty must be >= 0, got {self.length_penalty}")
        if self.length_penalty_form not in LENGTH_PENALTY_FORMS:
            problems.append(form_problem(self.length_penalty_form))
        if self.return_phrase_attention and self.alignment != "phrase":
            problems.append(f'return_phrase_attention needs alignment "phrase", got {self.alignment!r}')
        if problems:
            raise ValueError("invalid DecodingOptions: " + "; ".join(problems))

    @property
    def method(self) -> str:
        """The alignment method in force: the one named, else "attention"."""
        return self.alignment_method or "attention"

    @property
    def method_rows(self) -> MethodRows | None:
        """The rows that align each target token, or None without alignments (or for
        "bidirectional", whose rows are its halves')."""
        return METHOD_ROWS.get(self.method) if self.alignment != "none" else None

    @property
    def return_attention(self) -> bool:
        """Keep each hypothesis' attention rows (every step's, the EOS step's apart)."""
        return self.alignment != "none"

    @property
    def return_supervised_attention(self) -> bool:
        """Keep each hypothesis' supervised alignment head rows (the model must have the head)."""
        rows = self.method_rows
        return rows is not None and rows.name == "supervised_attention"

    def every_finished(self) -> DecodingOptions:
        """These options asking the search for every finished hypothesis its beam holds (up to
        beam_size) when more than one is wanted: two token sequences can read as one text
        ("▁a b" and "▁ab"), so an n-best list of distinct texts is picked from them."""
        return replace(self, n_best=self.beam_size if self.n_best > 1 else 1)

    def without_step_supervised_rows(self) -> DecodingOptions:
        """These options with the token rows kept but no supervised head rows at the steps (a head
        that reads the finished target gives them in one pass after the search)."""
        return replace(self, alignment_method="attention") if self.return_supervised_attention else self
