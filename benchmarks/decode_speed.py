"""Beam-search decoding speed of a model directory, without HTTP (a script, not a test).

Translates the first N sentences of a Multi30k split at several batch sizes and prints
sentences/s and milliseconds per batch; --profile adds torch.profiler's top operators, to see
whether a step is bound by kernels or by the host launching them. --mixed-batches N times N
batches of changing sizes twice, as a server sees them: the first pass pays whatever a kernel
library sets up per new shape, the second does not (--cudnn-attention on shows why it is off).

    python benchmarks/decode_speed.py --model-dir models/en-de --device cuda --batch-sizes 1,8,64
    python benchmarks/decode_speed.py --device cuda --batch-sizes "" --mixed-batches 40
    python benchmarks/decode_speed.py --device cpu --batch-sizes "" --reorder-bytes 8
    python benchmarks/decode_speed.py --device cpu --dtype int8 --batch-sizes 32 --sentences 64 --profile
    OMP_NUM_THREADS=1 python benchmarks/decode_speed.py --device cpu --dtype int8 --batch-sizes 32 --phases --allocator retain
    OMP_NUM_THREADS=1 python benchmarks/decode_speed.py --device cpu --dtype int8 --decoder kernels --batch-sizes 32 --phases --allocator retain

--phases splits each timing into the encoder, the decoder steps, the beam reorders, with
--decoder kernels the candidates ranked from the logits (model/cpu_kernels), and the rest (the
search itself and generate's own work), and counts the process's minor page faults. The torch
profiler of --profile does not see inside the C kernels (called through ctypes): their time is
in the phases, not in its table.
--allocator retain keeps freed heap memory in the process (model/cpu_allocator.py, what
the CPU torch runtime does); default leaves glibc as it is.

--reorder-bytes B decodes the first B sentences as one batch and counts the bytes that the
beam reorders copy (every state tensor a reorder returns that is not the one it was given),
split into the per-sentence tensors and the per-beam rest, beside what copying every tensor at
every reorder would move.
"""
from __future__ import annotations

import argparse
import dataclasses
import gzip
import random
import resource
import statistics
import time
from typing import Any

import torch

from host import cpu_name  # benchmarks/host.py: the script's own folder is on sys.path
from model.decoding import defaults as decoding_defaults
from model.model_dir import load_model_dir
from model.attention.kernels import avoid_per_shape_attention_plans
from model.decoding.generate import SearchDecoder, TransformerBackend, generate, source_batch
from model.decoding.options import DecodingOptions
from model.decoding.kernel_backend import KernelBackend
from model.decoder_state import DecoderState
from model.cpu_allocator import retain_freed_memory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_decode_arguments(parser)
    parser.add_argument("--dtype", choices=["float32", "float16", "int8"], default=None,
                        help="int8: the CPU fast path, linear layers int8 dynamically quantised (model/quantization.py)")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--mixed-batches", type=int, default=0, help="batches of random sizes, timed on first sight and again")
    parser.add_argument("--cudnn-attention", choices=["on", "off"], default="off", help="on: what the service avoids")
    parser.add_argument("--reorder-bytes", type=int, default=0, metavar="B", help="bytes copied by beam reorders, one batch of B")
    parser.add_argument("--phases", action="store_true", help="split the time into encoder, steps, reorders and search")
    parser.add_argument("--decoder", choices=["eager", "kernels"], default="eager",
                        help="kernels: the C decoding kernels (model/decoding/kernel_backend.py), CPU only")
    parser.add_argument("--allocator", choices=["default", "retain"], default="default",
                        help="retain: keep freed heap memory (model/cpu_allocator.py)")
    args = parser.parse_args()
    if args.allocator == "retain" and not retain_freed_memory():
        parser.error("--allocator retain needs glibc")

    device = torch.device(args.device)
    avoid_per_shape_attention_plans(device)
    if args.cudnn_attention == "on":
        torch.backends.cuda.enable_cudnn_sdp(True)
    int8 = args.dtype == "int8"
    if int8 and device.type != "cpu":
        parser.error("--dtype int8 runs on the CPU only")
    dtype = torch.float32 if int8 else getattr(torch, args.dtype) if args.dtype else (torch.float16 if device.type == "cuda" else torch.float32)
    loaded = load_model_dir(args.model_dir, device=device, dtype=dtype)
    if int8:
        from model.quantization import quantize_int8

        loaded = dataclasses.replace(loaded, model=quantize_int8(loaded.model))
        dtype = "int8 (dynamic, linear layers)"
    decoder = loaded.model
    if args.decoder == "kernels":
        from model.decoding.kernel_backend import KernelBackend

        decoder = KernelBackend(loaded.model)
    texts = read_sentences(args.split, args.sentences)
    options = DecodingOptions(beam_size=args.beam)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()
    print(f"device {device} ({name}), dtype {dtype}, torch {torch.__version__}, beam {args.beam}, {len(texts)} sentences, "
          f"{torch.get_num_threads()} threads, allocator {args.allocator}, {args.decoder} decoder")
    for batch_size in [int(b) for b in args.batch_sizes.split(",") if b]:
        batches = [texts[i : i + batch_size] for i in range(0, len(texts), batch_size)]
        timings = []
        for repeat in range(args.repeats + 1):
            with PhaseClock(device, enabled=args.phases and repeat > 0) as clock:
                for batch in batches:
                    generate(decoder, source_batch(loaded.tokenizer, batch, device), options)
            if repeat:  # the first pass warms up kernels and the allocator
                timings.append(clock.seconds)
                if args.phases:
                    print(f"batch {batch_size:4d}, pass {repeat}: {clock.report()}")
        seconds = statistics.median(timings)
        print(f"batch {batch_size:4d}: {len(texts) / seconds:8.1f} sentences/s, {1000 * seconds / len(batches):8.1f} ms per batch")
    if args.mixed_batches:
        time_mixed_batches(loaded, texts, options, device, args)
    if args.reorder_bytes:
        count_reorder_bytes(loaded, texts[: args.reorder_bytes], options, device)
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        batch = texts[:64]
        with profile(activities=activities) as prof:
            generate(decoder, source_batch(loaded.tokenizer, batch, device), options)
            sync(device)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
        # Operators dispatched per decoding step (one topk per step): on a launch-bound GPU host
        # each costs host time, so this count is what trimming the step's Python aims at.
        top = [e for e in prof.events() if e.name.startswith("aten::")
               and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))]
        steps = sum(e.name == "aten::topk" for e in top)
        if steps:
            print(f"{len(top) / steps:.1f} top-level aten operators per decoding step "
                  f"({steps} steps of one batch of {len(batch)}, beam {args.beam})")


class PhaseClock:
    """Wall time of a block, and with `enabled` its split: the encoder (`TransformerBackend.encode`),
    the decoder steps (`SearchDecoder.step`: the network and its log-softmax), the beam reorders
    (`SearchDecoder.reorder`) and the rest (the search and generate's own work), plus the
    process's minor page faults. On a GPU each phase is synchronised, which slows the whole."""

    PHASES = (("encoder", TransformerBackend, "encode"), ("encoder", KernelBackend, "encode"),
              ("steps", SearchDecoder, "step"), ("reorders", SearchDecoder, "reorder"),
              ("candidates", KernelBackend, "candidates"))

    def __init__(self, device: torch.device, enabled: bool):
        self.device, self.enabled = device, enabled
        self.spent = dict.fromkeys((name for name, _, _ in self.PHASES), 0.0)
        self.seconds = 0.0
        self.faults = 0
        self._saved: list[tuple[type, str, Any]] = []

    def __enter__(self) -> "PhaseClock":
        if self.enabled:
            for name, owner, method in self.PHASES:
                original = getattr(owner, method)
                self._saved.append((owner, method, original))
                setattr(owner, method, self._timed(name, original))
        sync(self.device)
        self._faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        sync(self.device)
        self.seconds = time.perf_counter() - self._start
        self.faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - self._faults
        for owner, method, original in self._saved:
            setattr(owner, method, original)

    def _timed(self, name: str, original):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            out = original(*args, **kwargs)
            sync(self.device)
            self.spent[name] += time.perf_counter() - start
            return out

        return timed

    def report(self) -> str:
        rest = self.seconds - sum(self.spent.values())
        parts = [f"{name} {1000 * spent:.0f} ms" for name, spent in self.spent.items()]
        return f"{1000 * self.seconds:.0f} ms: " + ", ".join(parts) + f", search and rest {1000 * rest:.0f} ms; {self.faults} page faults"


def time_mixed_batches(loaded, texts: list[str], options: DecodingOptions, device: torch.device, args) -> None:
    """The same batches of random sizes (and so random lengths) twice after one warm-up batch."""
    rng = random.Random(0)
    sizes = [rng.choice([1, 2, 3, 5, 8, 13, 21, 34, 55, 64]) for _ in range(args.mixed_batches)]
    batches = [rng.sample(texts, min(size, len(texts))) for size in sizes]
    generate(loaded.model, source_batch(loaded.tokenizer, texts[:2], device), options)
    for sight in ("first sight", "seen before"):
        times = []
        for batch in batches:
            sync(device)
            start = time.perf_counter()
            generate(loaded.model, source_batch(loaded.tokenizer, batch, device), options)
            sync(device)
            times.append(1000 * (time.perf_counter() - start))
        print(f"{len(batches)} mixed batches ({sum(sizes)} sentences), {sight}, cuDNN attention {args.cudnn_attention}: "
              f"{sum(times):8.0f} ms in all, median {statistics.median(times):6.1f} ms, max {max(times):7.1f} ms")


def count_reorder_bytes(loaded, texts: list[str], options: DecodingOptions, device: torch.device) -> None:
    """Bytes copied by the beam reorders of one batch (`DecoderState.reorder`, counted around it),
    beside what copying every state tensor at every reorder would move; "per sentence": the
    tensors that `DecoderState.sentence` names (projected memory, masks, phrase memory)."""
    counts: list[tuple[int, int, int]] = []  # per reorder: (per-sentence bytes copied, per-beam bytes, all bytes)
    reorder = DecoderState.reorder

    def counting(state: DecoderState, index: torch.Tensor) -> DecoderState:
        new = reorder(state, index)
        sizes = {name: t.numel() * t.element_size() for name, t in new.tensors.items()}
        copied = [name for name, t in new.tensors.items() if t is not state.tensors[name]]
        counts.append((sum(sizes[n] for n in copied if n in state.sentence),
                       sum(sizes[n] for n in copied if n not in state.sentence), sum(sizes.values())))
        return new

    DecoderState.reorder = counting  # type: ignore[method-assign]
    try:
        generate(loaded.model, source_batch(loaded.tokenizer, texts, device), options)
    finally:
        DecoderState.reorder = reorder  # type: ignore[method-assign]
    shared, beams, everything = (sum(c[i] for c in counts) for i in range(3))
    print(f"reorder bytes, {len(texts)} sentences, beam {options.beam_size}, {len(counts)} reorders: "
          f"copied {(shared + beams) / 1e6:.1f} MB (per-sentence tensors {shared / 1e6:.1f} MB, per-beam {beams / 1e6:.1f} MB); "
          f"copying every tensor would move {everything / 1e6:.1f} MB ({100 * (1 - (shared + beams) / max(1, everything)):.0f} % saved)")


def add_decode_arguments(parser: argparse.ArgumentParser) -> None:
    """What every decode-speed script times: a model, sentences of a split, batch sizes, beam, device, repeats."""
    parser.add_argument("--model-dir", default="models/en-de")
    parser.add_argument("--split", default="data/multi30k/test_2016_flickr.en.gz")
    parser.add_argument("--sentences", type=int, default=256)
    parser.add_argument("--batch-sizes", default="1,8,64")
    parser.add_argument("--beam", type=int, default=decoding_defaults.BEAM_SIZE)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeats", type=int, default=3)


def read_sentences(split: str, count: int) -> list[str]:
    with gzip.open(split, "rt", encoding="utf-8") as handle:
        return [line.strip() for _, line in zip(range(count), handle)]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


if __name__ == "__main__":
    main()
