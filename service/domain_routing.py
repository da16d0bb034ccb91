"""Which of a pair's models answers a request that names none, when the pair is served by models of
different domains (a caption model and a software-strings model of En->De): the model whose domain
the request's texts are likeliest to come from (docs/operations.md, "Several models per pair").

Each model already carries a language model of its training text: its SentencePiece unigram model
(model/text/domain_scorer.py), and where its card has them, the lengths in words of that text
(`source_lengths`, counted by `python -m training.source_lengths`). The texts' log-likelihood under
them is a naive-Bayes score of the texts against that model's domain; the request goes to the model
that scores its texts highest, all of them together (one answer names one model). Nothing is tuned
on a test set. Measured by `python benchmarks/domain_routing.py` (results/domain_routing.md;
`--development` for the sets a change is decided on).
"""
from __future__ import annotations

from collections.abc import Sequence

from service.runtime.domains import DomainScorer

# What a request's "model" (or the default_models setting) names to have the texts choose the model.
AUTO = "auto"


def likeliest(scorers: Sequence[DomainScorer], texts: Sequence[str]) -> int:
    """The index of the scorer under which ``texts`` are likeliest; a tie goes to the first listed.
    Their lengths are scored only where every scorer has them: a term the others lack would make
    the ones without it likelier whatever the texts."""
    lengths = all(scorer.has_lengths for scorer in scorers)
    best, best_score = 0, float("-inf")
    for index, scorer in enumerate(scorers):
        score = scorer.log_likelihood(texts, lengths)
        if score > best_score:
            best, best_score = index, score
    return best
