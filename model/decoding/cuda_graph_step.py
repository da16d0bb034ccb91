"""CUDA-graph replay of static decoding steps (model/decoding/static_decoding.py).

A `StaticDecoder` step t reads and writes only its bucket's buffers, so once captured its kernels
can be replayed for every later batch of that bucket with one launch instead of one per
operation (the eager step of a small model is bound by the host launching kernels). Step t
reads a t-row prefix of the caches, so every (decoder, t) is its own graph; all share one
memory pool: a step keeps no tensor it allocates (its results are copied into the buffers),
so the graphs' temporaries may overlap.

First sight of (decoder, t): the step runs for real on a side stream (the warm-up that
capture needs, and this batch's step t), then is captured without running. A capture that
fails (an operation that cannot be captured) is logged once and that decoder's steps run
eagerly from then on: slower, never wrong.
"""
from __future__ import annotations

import logging
import weakref

import torch

from model.decoding.static_decoding import StaticDecoder, StaticStepRunner, eager_runner

log = logging.getLogger("model.cuda_graph_step")


class CudaGraphRunner:
    """A `StaticStepRunner` that captures each (decoder, t) once and replays it afterwards."""

    def __init__(self) -> None:
        # Per decoder (one per bucket), its graphs by step; None once a capture failed (then eager).
        self.graphs: weakref.WeakKeyDictionary[StaticDecoder, dict[int, torch.cuda.CUDAGraph] | None] = weakref.WeakKeyDictionary()
        self.pool = None

    def __call__(self, decoder: StaticDecoder, t: int) -> None:
        graphs = self.graphs.setdefault(decoder, {})
        if graphs is None:
            decoder.run_step(t)
            return
        graph = graphs.get(t)
        if graph is not None:
            graph.replay()
            return
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            decoder.run_step(t)  # the warm-up, and this batch's step
        torch.cuda.current_stream().wait_stream(side)
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        graph = torch.cuda.CUDAGraph()
        try:
            # thread_local: another thread's CUDA calls (the service's metrics) do not void the capture.
            with torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
                decoder.run_step(t)  # recorded, not run
        except RuntimeError as error:
            log.warning("decoding step of bucket %s could not be captured as a CUDA graph, it runs eagerly: %s",
                        decoder.bucket, error)
            self.graphs[decoder] = None
            return
        graphs[t] = graph


def static_step_runner(device: torch.device, cuda_graphs: bool = True) -> StaticStepRunner:
    """The runner for a device: CUDA graphs on CUDA when asked, else the same step run eagerly."""
    return CudaGraphRunner() if device.type == "cuda" and cuda_graphs else eager_runner
