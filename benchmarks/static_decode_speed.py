"""Eager against static-state decoding (model/decoding/static_decoding.py), and on CUDA against captured
steps (model/decoding/cuda_graph_step.py): the same sentences, batches and beam; a script, not a test.

    python benchmarks/static_decode_speed.py --device cuda --batch-sizes 1,8,64
    python benchmarks/static_decode_speed.py --device cuda --dtype bfloat16
    OMP_NUM_THREADS=1 python benchmarks/static_decode_speed.py --device cpu --sentences 64 --batch-sizes 1,8

Every mode first decodes all batches once (warm-up: kernels, allocator, and for the graph mode
the capture of every bucket's steps), then the median of --repeats timed passes. It also counts
the hypotheses whose tokens differ from the eager ones (fp32: expected 0; in half precision
the row counts of the eager and static searches differ, so a few near-ties may flip).
Appends a section to results/static_decode_<device>.md naming the machine.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's packages, from anywhere

from decode_speed import add_decode_arguments, read_sentences, sync  # noqa: E402  (this folder is on sys.path)
from host import cpu_name  # noqa: E402  (benchmarks/host.py: the script's own folder is on sys.path)
from model.model_dir import load_model_dir  # noqa: E402
from model.attention.kernels import avoid_per_shape_attention_plans  # noqa: E402
from model.decoding.cuda_graph_step import CudaGraphRunner  # noqa: E402
from model.decoding.generate import generate, source_batch  # noqa: E402
from model.decoding.options import DecodingOptions  # noqa: E402
from model.decoding.static_decoding import StaticGenerator, eager_runner  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_decode_arguments(parser)
    parser.add_argument("--dtype", choices=["float32", "float16", "bfloat16"], default="float32")
    parser.add_argument("--check-every", type=int, default=4, help="steps between two reads of the finished flag")
    parser.add_argument("--out", type=Path, default=None, help="default: results/static_decode_<device>.md")
    args = parser.parse_args()

    device = torch.device(args.device)
    avoid_per_shape_attention_plans(device)
    dtype = getattr(torch, args.dtype)
    loaded = load_model_dir(args.model_dir, device=device, dtype=dtype)
    texts = read_sentences(args.split, args.sentences)
    options = DecodingOptions(beam_size=args.beam)
    machine = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()
    header = (f"{machine}, {args.model_dir}, {args.dtype}, torch {torch.__version__}, beam {args.beam}, "
              f"{len(texts)} sentences of {args.split}, {torch.get_num_threads()} CPU threads, "
              f"finished-check every {args.check_every} steps")
    modes = {"eager": None, "static": StaticGenerator(loaded.model, eager_runner, args.check_every)}
    if device.type == "cuda":
        modes["static + CUDA graphs"] = StaticGenerator(loaded.model, CudaGraphRunner(), args.check_every)
    lines = [f"### {time.strftime('%Y-%m-%d')}: {header}", "",
             "| batch | mode | sentences/s | ms per batch | hypotheses unlike eager |", "|---|---|---|---|---|"]
    print(header)
    for batch_size in [int(b) for b in args.batch_sizes.split(",") if b]:
        batches = [source_batch(loaded.tokenizer, texts[i : i + batch_size], device) for i in range(0, len(texts), batch_size)]
        reference = None
        for mode, static in modes.items():
            decode = partial(generate, loaded.model if static is None else static, options=options)
            found = [decode(src) for src in batches]  # the warm-up pass
            tokens = [[h.tokens for h in nbest] for result in found for nbest in result]
            reference = tokens if reference is None else reference
            unlike = sum(a != b for a, b in zip(tokens, reference, strict=True))
            timings = []
            for _ in range(args.repeats):
                sync(device)
                start = time.perf_counter()
                for src in batches:
                    decode(src)
                sync(device)
                timings.append(time.perf_counter() - start)
            seconds = statistics.median(timings)
            row = (f"| {batch_size} | {mode} | {len(texts) / seconds:.1f} | {1000 * seconds / len(batches):.1f} | "
                   f"{unlike} of {len(tokens)} |")
            print(row)
            lines.append(row)
    out = args.out or Path("results") / f"static_decode_{device.type}.md"
    with out.open("a", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n\n")
    print(f"appended to {out}")


if __name__ == "__main__":
    main()
