"""The OpenAPI schema with the rules that depend on what this server serves: the language pairs
(known once the models have loaded) and the text limits of its settings, so that a request the
schema allows is one the server can take (other than the token limits, which need the
tokenizer, and what the server is busy with).
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI

# The request bodies that name a pair and carry texts, with their text fields.
_TEXT_FIELDS = {"TranslateRequest": ("text",), "AlignRequest": ("text", "translation")}


Pair = tuple[str, str]  # (source, target) language codes


def with_served_rules(schema: dict[str, Any], pairs: Sequence[Pair], max_segments: int, max_chars: int) -> dict[str, Any]:
    """A copy of ``schema`` whose request bodies allow only the ``pairs`` served (none listed
    while nothing is loaded) and at most ``max_segments`` texts of ``max_chars`` characters."""
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
            served = [{"properties": {"source": {"const": source}, "target": {"const": target}}}
                      for source, target in pairs]
            body.setdefault("allOf", []).append({"anyOf": served})
            body["description"] = (body.get("description", "") + f"\n\nServed pairs: {', '.join(f'{s}-{t}' for s, t in pairs)}.").strip()
    return schema


def install_served_openapi(app: FastAPI, pairs: Callable[[], Sequence[Pair]], max_segments: int, max_chars: int) -> None:
    """Serve /openapi.json with the served rules (``pairs()`` is asked at each request: the
    models load after the server starts)."""
    base = app.openapi
    cache: dict[tuple[Pair, ...], dict[str, Any]] = {}

    def openapi() -> dict[str, Any]:
        key = tuple(pairs())
        if key not in cache:
            cache.clear()
            cache[key] = with_served_rules(base(), key, max_segments, max_chars)
        return cache[key]

    app.openapi = openapi  # type: ignore[method-assign]
