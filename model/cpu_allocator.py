"""Keep freed heap memory in the process, so that CPU decoding stops page-faulting every step.

A decoder step on the CPU allocates several tensors of a few MB (the (rows, vocabulary) logits
and log-probs) and frees them before the next step. glibc serves blocks that large with mmap,
or trims them off the top of the heap when they are freed, so each step maps fresh pages and
touches every one of them: `benchmarks/decode_speed.py --allocator` counts the page faults and
the time they cost. Raising glibc's mmap and trim thresholds (mallopt(3), the same knobs as the
MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ environment variables, but settable after the
process has started) lets freed blocks be reused as they are, the way jemalloc or tcmalloc
would. The price is that the process keeps its peak heap instead of handing it back, which a
server that decodes all day keeps anyway.

A training step's blocks are larger than the 32 MiB glibc lets the mmap threshold reach (the
logits of a 4,096-token batch over a 10,000-piece vocabulary are 164 MB, and their gradient as
much again), so training also turns mmap off (`heap_only`): every block then comes from the heap
and is reused. `benchmarks/cpu_training_allocator.py` measures it (results/cpu_training_allocator.md).
"""
from __future__ import annotations

import ctypes
import ctypes.util

# mallopt parameters (glibc malloc.h)
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3
M_MMAP_MAX = -4

MMAP_THRESHOLD = 32 * 2**20  # blocks up to 32 MiB come from the heap (glibc's dynamic threshold stops there too)
TRIM_THRESHOLD = 1 << 30  # keep up to 1 GiB of free heap top instead of returning it
TOP_PAD = 64 * 2**20  # grow the heap in 64 MiB steps


def retain_freed_memory(heap_only: bool = False) -> bool:
    """Set the thresholds on glibc's malloc; with `heap_only`, serve blocks of any size from the heap
    (no mmap). False (and nothing changed) on another C library."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    settings = [(M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TRIM_THRESHOLD, TRIM_THRESHOLD), (M_TOP_PAD, TOP_PAD)]
    if heap_only:
        settings.append((M_MMAP_MAX, 0))
    return all(mallopt(param, value) == 1 for param, value in settings)
