"""Shape buckets for static decoding (model/decoding/static_decoding.py): a batch is padded up to the
smallest bucket that holds it, so that a few fixed shapes serve every request and each shape's
decoder steps can be captured once (CUDA graphs) and replayed.

A bucket is (batch rows, source width, target steps). Target steps bound the decoder's caches:
a search with max length L (EOS not counted) runs at most L + 1 steps, each step writing one
cache row, so L + 1 rows suffice. Sizes come from small fixed ladders (powers of two); a size
above a ladder's top is rounded up to a multiple of the top, so any input still gets a bucket.
"""
from __future__ import annotations

from dataclasses import dataclass

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
SOURCE_WIDTHS = (8, 16, 32, 64, 128, 256)
TARGET_STEPS = (8, 16, 32, 64, 128, 256)


@dataclass(frozen=True)
class Bucket:
    batch: int  # sentences (the beams multiply the decoder rows)
    source: int  # source tokens, EOS included
    target: int  # decoder steps, hence cache rows


def round_up(value: int, ladder: tuple[int, ...]) -> int:
    """The smallest rung >= value; above the top, the next multiple of the top."""
    if value < 1:
        raise ValueError(f"a bucket size must be >= 1, got {value}")
    for rung in ladder:
        if rung >= value:
            return rung
    top = ladder[-1]
    return -(-value // top) * top


def choose_bucket(
    batch: int, source_width: int, max_length: int, *, position_limit: int,
    batch_sizes: tuple[int, ...] = BATCH_SIZES, source_widths: tuple[int, ...] = SOURCE_WIDTHS,
    target_steps: tuple[int, ...] = TARGET_STEPS,
) -> Bucket:
    """The bucket for `batch` sentences of at most `source_width` tokens (EOS included) whose
    hypotheses hold at most `max_length` tokens besides EOS.

    position_limit is the model's max_positions: no source or target may be embedded beyond it,
    so both widths are capped there (the inputs already fit: generate.max_lengths caps
    max_length at max_positions - 1, and a longer source cannot be encoded at all).
    """
    if max_length < 0:
        raise ValueError(f"max_length must be >= 0, got {max_length}")
    if source_width > position_limit:
        raise ValueError(f"a source of {source_width} tokens exceeds the model's {position_limit} positions")
    steps = max_length + 1  # the last step may only give EOS
    if steps > position_limit:
        raise ValueError(f"{steps} decoder steps exceed the model's {position_limit} positions")
    return Bucket(
        batch=round_up(batch, batch_sizes),
        source=min(round_up(source_width, source_widths), position_limit),
        target=min(round_up(steps, target_steps), position_limit),
    )
