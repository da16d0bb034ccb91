"""A runtime that costs what a real one costs per batch size, without a model.

``SimulatedRuntime`` (the test fake runtime, testing/fake_runtime.py) sleeps per batch as
long as a ``BatchLatency`` curve says for the batch's size, so that the load benchmark can
measure the serving stack (HTTP, batcher, queue) in front of a runtime that costs what a real one
costs on a machine we do not have at hand, e.g. the H100 decode times of results/decode_cuda.md.
Sleeping holds no GIL, like a model in its own inference process
(service/runtime/inference_process.py). benchmarks/simulated_server.py serves it.
"""
from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping

from testing.fake_runtime import FakeRuntime


class BatchLatency:
    """Seconds per batch of n texts: linear between the given (n, ms) points, the first point's
    value below it, and the last segment's slope beyond the last point (a batch larger than any
    measured one costs more, not the same)."""

    def __init__(self, points_ms: Mapping[int, float]) -> None:
        if not points_ms:
            raise ValueError("batch latency needs at least one (batch size, ms) point")
        bad = [f"{n}: {ms}" for n, ms in points_ms.items() if int(n) < 1 or not 0 <= float(ms) < 60_000]
        if bad:
            raise ValueError(f"batch latency points need batch size >= 1 and 0 <= ms < 60000, got {', '.join(bad)}")
        pairs = sorted((int(n), float(ms)) for n, ms in points_ms.items())
        self.sizes = [n for n, _ in pairs]
        self.ms = [ms for _, ms in pairs]

    def seconds(self, batch_size: int) -> float:
        sizes, ms = self.sizes, self.ms
        if len(sizes) == 1 or batch_size <= sizes[0]:
            return ms[0] / 1000
        i = min(bisect_right(sizes, batch_size), len(sizes) - 1)  # segment (i-1, i); beyond: the last one
        slope = (ms[i] - ms[i - 1]) / (sizes[i] - sizes[i - 1])
        return max(0.0, ms[i - 1] + slope * (batch_size - sizes[i - 1])) / 1000

    @classmethod
    def parse(cls, text: str) -> BatchLatency:
        """"1:71.4,8:110.4,64:150.7" (batch size:milliseconds, comma-separated)."""
        points = {}
        for item in text.split(","):
            size, sep, ms = item.partition(":")
            try:
                if not sep:
                    raise ValueError
                points[int(size)] = float(ms)
            except ValueError:
                raise ValueError(f"batch latency: {item.strip()!r} is not SIZE:MS (e.g. 1:71.4,64:150.7)") from None
        return cls(points)


class SimulatedRuntime(FakeRuntime):
    """The fake runtime, sleeping ``latency.seconds(len(texts))`` per batch."""

    def __init__(self, source_lang: str, target_lang: str, latency: BatchLatency) -> None:
        super().__init__(source_lang, target_lang)
        self.latency = latency

    def batch_delay_s(self, batch_size: int) -> float:
        return self.latency.seconds(batch_size)
