"""Structural alignment bias terms are chosen by name from one registry (like the attention kinds).

A registered class provides:
- `reads`: which `model.biases.history` signal it reads ("previous", "coverage" or "position"),
- `validate_options(options) -> list[str]` (problems, each naming the bias and option; empty when fine),
- a constructor `(n_heads, options)`,
- `forward(history, lengths, source_len) -> (B, H, T, S)` fp32, the term added to every head's logits.
"""
from __future__ import annotations

from typing import Callable, TypeVar

_REGISTRY: dict[str, type] = {}

T = TypeVar("T", bound=type)


def register_bias(name: str) -> Callable[[T], T]:
    def decorate(cls: T) -> T:
        if name in _REGISTRY:
            raise ValueError(f"alignment bias {name!r} is already registered by {_REGISTRY[name].__name__}")
        _REGISTRY[name] = cls
        return cls

    return decorate


def known_biases() -> list[str]:
    _load_builtin_biases()
    return sorted(_REGISTRY)


def bias_class(name: str) -> type:
    _load_builtin_biases()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown alignment bias {name!r}; known biases: {', '.join(sorted(_REGISTRY))}") from None


def _load_builtin_biases() -> None:
    # Imported lazily so that the registry itself has no dependency on the bias terms.
    from model.biases import fertility, markov, position  # noqa: F401
