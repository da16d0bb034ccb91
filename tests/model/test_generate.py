"""Beam search over the incremental decoder equals beam search over full recomputation."""
import torch

from model.decoding.generate import generate, max_lengths
from model.decoding.options import DecodingOptions
from tests.helpers import assert_cached_search_equals_uncached, tiny_model
from tests.helpers import TINY_MODEL_OPS, assert_close_for

SRC = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0], [11, 2, 0, 0, 0]])


def test_cached_search_equals_uncached_search():
    model = tiny_model(seed=3)
    assert_cached_search_equals_uncached(model, SRC, max_length_offset=3)


def test_a_padded_sentence_translates_as_it_does_alone():
    model = tiny_model(seed=4)
    options = DecodingOptions(beam_size=4, n_best=2, max_length_offset=4)
    batched = generate(model, SRC, options)
    for row in range(SRC.shape[0]):
        length = int(SRC[row].ne(0).sum())
        alone = generate(model, SRC[row : row + 1, :length], options)[0]
        assert [h.tokens for h in alone] == [h.tokens for h in batched[row]]
        assert_close_for([a.score for a in alone], [b.score for b in batched[row]], ops=TINY_MODEL_OPS)


def test_max_lengths_follow_the_source_length():
    options = DecodingOptions(max_length_ratio=1.5, max_length_offset=2)
    assert max_lengths(SRC, 0, options, limit=100).tolist() == [10, 7, 5]
    assert max_lengths(SRC, 0, options, limit=6).tolist() == [6, 6, 5]
