"""The tokenizer language model (model/text/domain_scorer.py) by which a request's texts choose among
a pair's models of several domains (service/domain_routing.py), handed to the service above
service/runtime, which imports nothing of model/ itself (tests/service/test_service_layering.py)."""
from __future__ import annotations

from model.text.domain_scorer import UNKNOWN_PENALTY, DomainScorer

__all__ = ["UNKNOWN_PENALTY", "DomainScorer"]
