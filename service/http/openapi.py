"""The OpenAPI schema with the rules that depend on what this server serves: the language pairs
and the names of the models of each (known once the models have loaded) and the text limits of its settings, so that a request the
schema allows is one the server can take (other than the token limits, which need the
tokenizer, and what the server is busy with).
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI

from service.domain_routing import AUTO

# The request bodies that name a pair and carry texts, with their text fields.
_TEXT_FIELDS = {"TranslateRequest": ("text",), "AlignRequest": ("text", "translation")}


Pair = tuple[str, str]  # (source, target) language codes
Model = tuple[Pair, str]  # a served model: its pair and its name


def with_served_rules(schema: dict[str, Any], models: Sequence[Model], max_segments: int, max_chars: int) -> dict[str, Any]:
    """A copy of ``schema`` whose request bodies allow only the pairs of the ``models`` served
    (none listed while nothing is loaded), for each pair only its models' names in "model", and at
    most ``max_segments`` texts of ``max_chars`` characters."""
    names: dict[Pair, list[str]] = {}
    for pair, name in models:
        names.setdefault(pair, []).append(name)
    pairs = list(names)
    schema = copy.deepcopy(schema)
    bodies = schema.get("components", {}).get("schemas", {})
    for name, fields in _TEXT_FIELDS.items():
        body = bodies.get(name)
        if body is None:
            continue
        for field in fields:
            for shape in body["properties"][field]["anyOf"]:
                if shape["type"] == "string":
                    shape["maxLength"] = max_chars
                else:
                    shape["maxItems"] = max_segments
                    shape["items"]["maxLength"] = max_chars
        if pairs:
            # "model" absent or null: the pair's default; else one of the pair's models, or "auto"
            # (the texts choose: service/domain_routing.py; on a pair of one domain, its default).
            served = [{"properties": {"source": {"const": source}, "target": {"const": target},
                                      "model": {"anyOf": [{"enum": [*names[(source, target)], AUTO]}, {"type": "null"}]}}}
                      for source, target in pairs]
            body.setdefault("allOf", []).append({"anyOf": served})
            listed = "; ".join(f"{s}-{t} (models: {', '.join(names[(s, t)])})" for s, t in pairs)
            body["description"] = (body.get("description", "") + f"\n\nServed pairs: {listed}.").strip()
    return schema


def install_served_openapi(app: FastAPI, models: Callable[[], Sequence[Model]], max_segments: int, max_chars: int) -> None:
    """Serve /openapi.json with the served rules (``models()`` is asked at each request: the
    models load after the server starts)."""
    base = app.openapi
    cache: dict[tuple[Model, ...], dict[str, Any]] = {}

    def openapi() -> dict[str, Any]:
        key = tuple(models())
        if key not in cache:
            cache.clear()
            cache[key] = with_served_rules(base(), key, max_segments, max_chars)
        return cache[key]

    app.openapi = openapi  # type: ignore[method-assign]
