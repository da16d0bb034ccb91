"""Attention kinds are chosen by name from one registry, so variants compose without flags."""
from __future__ import annotations

from typing import Callable, TypeVar

from model.attention.contract import AttentionModule

SITES = ("encoder_self", "decoder_self", "cross")

_REGISTRY: dict[str, type] = {}

T = TypeVar("T", bound=type)


def register_attention(name: str) -> Callable[[T], T]:
    """Class decorator: make an attention module available under `name`.

    A registered class follows `model.attention.contract.AttentionKind` (derive from its
    `AttentionModule` for the defaults of the optional capabilities).
    """

    def decorate(cls: T) -> T:
        if name in _REGISTRY:
            raise ValueError(f"attention kind {name!r} is already registered by {_REGISTRY[name].__name__}")
        if not issubclass(cls, AttentionModule):
            raise TypeError(f"attention kind {name!r}: {cls.__name__} must derive from model.attention.contract.AttentionModule")
        _REGISTRY[name] = cls
        return cls

    return decorate


def known_attention_kinds() -> list[str]:
    _load_builtin_kinds()
    return sorted(_REGISTRY)


def attention_class(name: str) -> type:
    _load_builtin_kinds()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown attention kind {name!r}; known kinds: {', '.join(sorted(_REGISTRY))}") from None


def _load_builtin_kinds() -> None:
    # Imported lazily so that the registry module itself has no dependency on the variants.
    from model.attention import convkv, fine2d, queryk, vanilla  # noqa: F401
