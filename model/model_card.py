"""A model directory's card (``model_card.json``): its domain and measured scores, which the
service lists (GET /models, service/catalog.py) and ``phrasal-eval --record`` writes.

A model's name is its directory's name. Its domain and scores come from the card when it has one,
else the domain given by the caller (the service's ``model_domains`` setting), else "general";
scores stay null when nothing was measured. Its kind is read from its config.json: the attention
kinds it uses ("vanilla" when every site is vanilla) and "+align" for a supervised alignment head.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from model.text.domain_scorer import LENGTH_BINS

CARD_FILE = "model_card.json"
DEFAULT_DOMAIN = "general"
_ATTENTION_SITES = ("encoder_self_attention", "decoder_self_attention", "cross_attention")

# Per test set (e.g. "test_2016_flickr"), per metric (e.g. "bleu"): the score, null if not measured.
Scores = dict[str, dict[str, float | None]]


class _CardFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    domain: str | None = Field(default=None, min_length=1, max_length=64)
    scores: Scores = Field(default_factory=dict)
    # Its training text's source side counted by words (whitespace-separated), index n for n words,
    # the last for LENGTH_BINS - 1 or more: the length part of the domain's language model
    # (model/text/domain_scorer.py). Written by `python -m training.source_lengths`.
    source_lengths: list[int] | None = Field(default=None, min_length=LENGTH_BINS, max_length=LENGTH_BINS)


@dataclass(frozen=True)
class ModelCard:
    """What the service says about a model, known before it loads."""

    name: str
    domain: str = DEFAULT_DOMAIN
    scores: Scores | None = None  # None: never measured (no model card, or one without scores)
    kind: str | None = None  # None: no config.json to read it from (a bare runtime, some exports)


def read_card(path: Path, domains: Mapping[str, str] = {}) -> ModelCard:
    """The card of the model in directory ``path``: its name, domain, scores and kind. A missing
    model_card.json or config.json leaves what they would say at its default; a malformed one is a
    ValueError naming the file."""
    path = Path(path)
    name = path.name
    domain, scores = domains.get(name, DEFAULT_DOMAIN), None
    card_path = path / CARD_FILE
    if card_path.is_file():
        try:
            card = _CardFile.model_validate_json(card_path.read_bytes())
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "the file"
            raise ValueError(f"{card_path}: {where}: {first['msg']}") from None
        if card.domain is not None:
            domain = card.domain
        scores = card.scores or None
    return ModelCard(name=name, domain=domain, scores=scores, kind=model_kind(path))


def read_source_lengths(path: Path) -> list[int] | None:
    """The card's source_lengths (model directory ``path``), None where it has none or no readable
    card (the card's own reader, ``read_card``, names what is wrong with one)."""
    card_path = Path(path) / CARD_FILE
    try:
        return _CardFile.model_validate_json(card_path.read_bytes()).source_lengths
    except (OSError, ValidationError):
        return None


def record_source_lengths(path: Path, counts: list[int]) -> Path:
    """Write ``counts`` as the source_lengths of model directory ``path``'s card (made if missing,
    everything else kept)."""
    read_card(path)  # a malformed card stops here, before it is overwritten
    return _write_card_field(path, "source_lengths", list(counts))


def model_kind(path: Path) -> str | None:
    """The family a model directory's config.json describes, e.g. "vanilla", "vanilla+align",
    "queryk"; None without a readable config.json."""
    try:
        config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    kinds = []
    for site in _ATTENTION_SITES:
        attention = config.get(site)
        kind = attention.get("kind") if isinstance(attention, dict) else attention
        if isinstance(kind, str) and kind != "vanilla" and kind not in kinds:
            kinds.append(kind)
    family = "+".join(kinds) or "vanilla"
    return family + "+align" if config.get("supervised_alignment") else family


def record_scores(path: Path, test_set: str, scores: Mapping[str, float | None]) -> Path:
    """Merge one test set's ``scores`` into the model_card.json of model directory ``path`` (made
    if missing; its domain and other test sets kept): what ``phrasal-eval --record`` writes."""
    card = read_card(path)  # a malformed card stops here, before it is overwritten
    return _write_card_field(path, "scores", {**(card.scores or {}), test_set: dict(scores)})


def _write_card_field(path: Path, key: str, value: object) -> Path:
    """Set ``key`` of model directory ``path``'s card (made if missing, everything else kept)."""
    card_path = Path(path) / CARD_FILE
    current = json.loads(card_path.read_text(encoding="utf-8")) if card_path.is_file() else {}
    current[key] = value
    _CardFile.model_validate(current)
    card_path.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return card_path
