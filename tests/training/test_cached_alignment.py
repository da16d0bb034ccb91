"""training/cached_alignment.py: the head's loss on cached features is the alignment loss the real
training path (`DirectionalObjective`, what `python -m training train --init` runs) computes on
the same batch, and training on the cache moves the head only."""
from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
import torch

from model.transformer import Transformer
from tests.helpers import tiny_config
from training.cached_alignment import (cache_features, cached_batch, cached_loss, sampled_pairs, token_batches,
                                       train_head)
from training.data import collate
from training.loop import DirectionalObjective
from tests.helpers import TINY_MODEL_OPS, assert_close_for

pytestmark = pytest.mark.usefixtures("one_thread")

PAIRS = [([5, 6, 7], [8, 9]), ([10], [11, 12, 13]), ([14, 15], [16])]
LABELS = [[(0, 0), (2, 1)], [(0, 2)], [(1, 0)]]  # (source piece, target piece)


@pytest.mark.parametrize("extra", [{}, {"heads": 2, "self_attention": True, "diagonal": True}])
def test_the_cached_loss_is_the_training_loop_s_alignment_loss(extra):
    torch.manual_seed(0)
    options = {"layer": 0, "head": "added", "weight": 1.0, **extra}
    model = Transformer(tiny_config(supervised_alignment=options, dropout=0.0))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("supervised_alignment."):
                p.copy_(torch.randn(p.shape))
    session = SimpleNamespace(recipe=SimpleNamespace(label_smoothing=0.1), device=torch.device("cpu"), amp=False,
                              data=SimpleNamespace(train_alignment=LABELS))
    _, tallies, tokens = DirectionalObjective(model.train(), session).update(collate(PAIRS, [0, 1, 2]))
    real = tallies["alignment"][0] / tokens
    cache = cache_features(model, [s for s, _ in PAIRS], [t for _, t in PAIRS], LABELS, dtype=torch.float32)
    model.train()
    assert_close_for(cached_loss(model, cached_batch(cache, [0, 1, 2])), real, ops=TINY_MODEL_OPS)


def test_training_on_the_cache_moves_the_head_only():
    torch.manual_seed(0)
    model = Transformer(tiny_config(supervised_alignment={"layer": 1, "head": "added", "weight": 1.0,
                                                          "diagonal": True}, dropout=0.0))
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    cache = cache_features(model, [s for s, _ in PAIRS], [t for _, t in PAIRS], LABELS)
    losses = train_head(model, cache, epochs=3, lr=0.01, warmup=1, max_tokens=8, log=lambda _: None)
    assert losses[-1] < losses[0]
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name]) != name.startswith("supervised_alignment."), name


def test_token_batches_cover_every_pair_once_within_the_budget():
    torch.manual_seed(0)
    model = Transformer(tiny_config(supervised_alignment={"layer": 0, "head": "added", "weight": 1.0}))
    cache = cache_features(model, [s for s, _ in PAIRS], [t for _, t in PAIRS], LABELS)
    batches = token_batches(cache, max_tokens=6, rng=random.Random(0))
    assert sorted(i for b in batches for i in b) == [0, 1, 2]
    assert all(len(b) * max(cache.states[i].shape[0] for i in b) <= 6 or len(b) == 1 for b in batches)


def test_a_sample_is_distinct_pairs_in_order_the_same_for_a_seed_and_all_when_it_asks_for_more():
    chosen = sampled_pairs(1000, 50, seed=1)
    assert len(set(chosen)) == 50 and chosen == sorted(chosen) and 0 <= chosen[0] and chosen[-1] < 1000
    assert chosen == sampled_pairs(1000, 50, seed=1) != sampled_pairs(1000, 50, seed=2)
    assert chosen[-1] >= 500  # not a prefix
    assert sampled_pairs(7, 50, seed=1) == list(range(7))
