"""The models served: per model its card (name, domain, scores, kind: model/model_card.py, read
through service/runtime/cards.py) and runtime, and which model answers a pair when a request names
none (docs/operations.md, "Several models per pair").
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from service.domain_routing import AUTO
from service.runtime.domains import DomainScorer
from service.runtime.cards import DEFAULT_DOMAIN, ModelCard
from service.runtime.base import TranslationRuntime

# The share of placeholders (%) a model must keep alone to be sent them as written first.
KEEPS_PLACEHOLDERS = 50.0

# Names become metric labels and request values: short and plain.
MODEL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class ServedModel:
    card: ModelCard
    runtime: TranslationRuntime
    # Its tokenizer's language model, by which a request naming no model may choose it
    # (service/domain_routing.py); None: chosen only by name or by being its pair's first.
    scorer: DomainScorer | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        return self.card.name

    @property
    def pair(self) -> str:
        return self.runtime.pair

    @property
    def key(self) -> tuple[str, str]:
        return self.runtime.source_lang, self.runtime.target_lang

    @property
    def keeps_placeholders(self) -> bool:
        """Whether the model, alone, kept the placeholders of at least half the test sentences that
        had some, on a test set its card scores (the `placeholders` score: training/evaluate.py).
        Such a model is sent a text with placeholders as written first (protected_translation
        ``serve_as_written``); one that was not measured, or that breaks them (the caption models:
        8.6 % on the software test split), gets them taken out at once and pays one search, not two."""
        scores = self.card.scores or {}
        return any((metrics.get("placeholders") or 0.0) >= KEEPS_PLACEHOLDERS for metrics in scores.values())


def as_served_model(item: ServedModel | TranslationRuntime, domains: Mapping[str, str] = {}) -> ServedModel:
    """``item`` as a served model: a bare runtime (a test's, a benchmark's) is named after its pair."""
    if isinstance(item, ServedModel):
        return item
    if not isinstance(item, TranslationRuntime):
        raise TypeError(f"{type(item).__name__} is not a service.runtime.base.TranslationRuntime")
    return ServedModel(ModelCard(name=item.pair, domain=domains.get(item.pair, DEFAULT_DOMAIN)), item)


def default_models(models: Sequence[ServedModel], chosen: Mapping[str, str]) -> dict[tuple[str, str], ServedModel]:
    """The model that answers each served pair when a request names none and its texts do not
    choose (``routed``): the one ``chosen`` names for it (the default_models setting), else the
    first listed. ValueError for a choice that names a model not served, one of another pair, or
    "auto" for a pair not served."""
    by_name = {model.name: model for model in models}
    defaults: dict[tuple[str, str], ServedModel] = {}
    for model in models:
        defaults.setdefault(model.key, model)
    served_pairs = {model.pair for model in models}
    problems = []
    for pair, name in chosen.items():
        model = by_name.get(name)
        if name == AUTO:
            if pair not in served_pairs:
                problems.append(f"default_models: {pair} is not served (served: {', '.join(sorted(served_pairs))})")
        elif model is None:
            problems.append(f"default_models: {pair} names {name!r}, which is not served (served: {', '.join(by_name)})")
        elif model.pair != pair:
            problems.append(f"default_models: {pair} names {name!r}, which serves {model.pair}")
        else:
            defaults[model.key] = model
    if problems:
        raise ValueError("; ".join(problems))
    return defaults


def domain_candidates(models: Sequence[ServedModel]) -> dict[tuple[str, str], list[ServedModel]]:
    """Per pair, the models its texts may choose among (service/domain_routing.py): the first listed
    of each domain that has a scorer, in the order listed; a pair with fewer than two is left out."""
    by_pair: dict[tuple[str, str], dict[str, ServedModel]] = {}
    for model in models:
        if model.scorer is not None:
            by_pair.setdefault(model.key, {}).setdefault(model.card.domain, model)
    return {key: list(domains.values()) for key, domains in by_pair.items() if len(domains) > 1}


def routed_pairs(candidates: Mapping[tuple[str, str], list[ServedModel]],
                 chosen: Mapping[str, str]) -> dict[tuple[str, str], list[ServedModel]]:
    """The pairs whose requests naming no model are answered by the model their texts choose: those
    of ``candidates`` (``domain_candidates``: served by models of several domains) unless the
    default_models setting names one model for the pair ("auto" there says the same as leaving the
    pair out)."""
    pinned = {pair for pair, name in chosen.items() if name != AUTO}
    return {key: models for key, models in candidates.items() if models[0].pair not in pinned}
