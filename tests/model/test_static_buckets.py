"""Bucket choice for static decoding (model/decoding/static_buckets.py)."""
import pytest

from model.decoding.static_buckets import Bucket, choose_bucket, round_up


def test_round_up_takes_the_smallest_rung_that_holds_the_value():
    ladder = (1, 2, 4, 8)
    assert [round_up(v, ladder) for v in (1, 2, 3, 4, 5, 8)] == [1, 2, 4, 4, 8, 8]


def test_above_the_top_rung_a_multiple_of_the_top():
    assert [round_up(v, (4, 8)) for v in (9, 16, 17)] == [16, 16, 24]


def test_round_up_refuses_nothing():
    with pytest.raises(ValueError, match="a bucket size must be >= 1, got 0"):
        round_up(0, (1, 2))


def test_a_bucket_holds_the_batch_the_source_and_every_step():
    # 3 sentences, 13 source tokens, max length 20: 21 steps (the last may only give EOS).
    assert choose_bucket(3, 13, 20, position_limit=1024) == Bucket(batch=4, source=16, target=32)
    assert choose_bucket(1, 8, 7, position_limit=1024) == Bucket(batch=1, source=8, target=8)
    assert choose_bucket(64, 9, 8, position_limit=1024) == Bucket(batch=64, source=16, target=16)
    assert choose_bucket(65, 300, 300, position_limit=1024) == Bucket(batch=128, source=512, target=512)


def test_widths_stop_at_the_models_positions():
    assert choose_bucket(2, 100, 120, position_limit=128) == Bucket(batch=2, source=128, target=128)
    assert choose_bucket(2, 128, 127, position_limit=128) == Bucket(batch=2, source=128, target=128)


def test_what_no_position_can_hold_is_refused():
    with pytest.raises(ValueError, match="a source of 129 tokens exceeds the model's 128 positions"):
        choose_bucket(1, 129, 10, position_limit=128)
    with pytest.raises(ValueError, match="129 decoder steps exceed the model's 128 positions"):
        choose_bucket(1, 10, 128, position_limit=128)
    with pytest.raises(ValueError, match="max_length must be >= 0, got -1"):
        choose_bucket(1, 10, -1, position_limit=128)


def test_custom_ladders():
    bucket = choose_bucket(5, 6, 6, position_limit=64, batch_sizes=(8,), source_widths=(6,), target_steps=(7, 14))
    assert bucket == Bucket(batch=8, source=6, target=7)
