"""The model cards (model/model_card.py: domain, scores, kind) of the directories the runtimes
load, handed to the service above service/runtime, which imports nothing of model/ itself
(tests/service/test_service_layering.py) while `phrasal-eval --record` writes the same cards
without importing the service."""
from __future__ import annotations

from model.model_card import DEFAULT_DOMAIN, ModelCard, read_card

__all__ = ["DEFAULT_DOMAIN", "ModelCard", "read_card"]
