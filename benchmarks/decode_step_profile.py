"""Where a decoding step's time goes on a GPU: the question behind the batch-1 latency target (issue 30).

    python benchmarks/decode_step_profile.py --device cuda --batch-size 1          # what the service runs: graphs, fp16
    python benchmarks/decode_step_profile.py --device cuda --batch-size 128
    python benchmarks/decode_step_profile.py --device cpu --sentences 4 --dtype float32   # a dry run

On an H200 the static search with CUDA graphs took 14.6 ms a sentence at batch 1 (p50) against
CTranslate2 float16's 16.6 ms (results/engines_cuda.md), not the half the issue asks for. This decodes
`--sentences` sentences of `--split` in batches of `--batch-size` with the search the service runs on
CUDA (model/decoding/static_decoding.py, each step a CUDA graph once captured, `--graphs off` for the
same steps run eagerly), once to warm up (the captures), then once under the profiler, and reports:
- ms a batch by the wall clock and the search's steps a batch (step 0 and the encoder run eagerly);
- device kernel ms a step and kernels a step (every kernel of the pass, encoder included, over its
  steps), and how much of the wall clock the device was busy: near 100 % the kernels themselves
  bound the step (fewer or fused kernels would help), far below it the gaps between them do;
- the kernels with the most device time a step (on the CPU: the operators with the most host time).
The kernels a CUDA graph replays are traced as kernels (CUPTI); a run with graphs that counts far fewer
kernels a step than `--graphs off` would mean the trace missed them.
Writes a section to `--out` (default results/decode_step_profile_DEVICE.md).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from host import append_report, run_heading  # noqa: E402  (benchmarks/ is on sys.path)
from profiled import kernel_events, open_device  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="decode_step_profile", description=__doc__.split("\n\n")[0])
    p.add_argument("--model-dir", type=Path, default=REPO / "models" / "en-de")
    p.add_argument("--split", type=Path, default=REPO / "data" / "multi30k" / "test_2016_flickr.en.gz")
    p.add_argument("--sentences", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", choices=("float16", "float32", "bfloat16"), default="float16")
    p.add_argument("--graphs", choices=("on", "off"), default="on", help="CUDA graphs (CUDA only)")
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    if args.sentences < 1 or args.batch_size < 1 or args.beam < 1 or args.top < 1:
        p.error("--sentences, --batch-size, --beam and --top: at least 1")
    if not args.model_dir.is_dir():
        p.error(f"--model-dir: no model directory {args.model_dir}")
    if not args.split.is_file():
        p.error(f"--split: no file {args.split}")

    import torch
    from torch.profiler import ProfilerActivity, profile

    from decode_speed import read_sentences, sync  # noqa: E402  (benchmarks/ is on sys.path)
    from model.decoding.cuda_graph_step import static_step_runner
    from model.decoding.generate import generate, source_batch
    from model.decoding.options import DecodingOptions
    from model.decoding.static_decoding import StaticGenerator
    from model.model_dir import load_model_dir

    device = open_device(p, args.device)
    loaded = load_model_dir(str(args.model_dir), device=device, dtype=getattr(torch, args.dtype))
    texts = read_sentences(str(args.split), args.sentences)
    batches = [source_batch(loaded.tokenizer, texts[i:i + args.batch_size], device)
               for i in range(0, len(texts), args.batch_size)]
    runner = static_step_runner(device, cuda_graphs=args.graphs == "on")
    steps = [0]

    def counted(decoder, t: int) -> None:
        steps[0] += 1
        runner(decoder, t)

    search = StaticGenerator(loaded.model, counted)
    options = DecodingOptions(beam_size=args.beam)
    for src in batches:  # warm-up: kernels chosen, graphs captured
        generate(search, src, options)
    sync(device)
    steps[0] = 0
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        started = time.perf_counter()
        for src in batches:
            generate(search, src, options)
        sync(device)
        wall_s = time.perf_counter() - started
    stepped = max(steps[0], 1)
    events = prof.key_averages()
    kernels = kernel_events(events)
    device_ms = sum(e.device_time_total for e in kernels) / 1000
    launches = sum(e.count for e in kernels)
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    graphs = "CUDA graphs" if device.type == "cuda" and args.graphs == "on" else "eager steps"
    command = (f"    python benchmarks/decode_step_profile.py --device {args.device} --batch-size {args.batch_size} "
               f"--sentences {args.sentences} --beam {args.beam} --dtype {args.dtype} --graphs {args.graphs}")
    lines = [command, "",
             f"{args.model_dir.name}, {args.dtype}, static search with {graphs}, beam {args.beam}, {len(texts)} sentences "
             f"of {args.split.name} in {len(batches)} batches of up to {args.batch_size}; {card}, torch {torch.__version__}.", "",
             "| wall ms a batch | steps a batch | device kernel ms a step | kernels a step | device busy |",
             "|---:|---:|---:|---:|---:|"]
    if kernels:
        busy = f"{100 * device_ms / (1000 * wall_s):.0f} %"
        lines.append(f"| {1000 * wall_s / len(batches):.2f} | {stepped / len(batches):.1f} | {device_ms / stepped:.3f} | "
                     f"{launches / stepped:.0f} | {busy} |")
        top = sorted(kernels, key=lambda e: e.device_time_total, reverse=True)[:args.top]
        lines += ["", "Kernels with the most device time (µs a step; launches a step):", "",
                  "| kernel | µs | launches |", "|---|---:|---:|"]
        lines += [f"| `{e.key[:90]}` | {e.device_time_total / stepped:.1f} | {e.count / stepped:.1f} |" for e in top]
    else:  # no device: the host's operators instead
        lines.append(f"| {1000 * wall_s / len(batches):.2f} | {stepped / len(batches):.1f} | – | – | – |")
        top = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:args.top]
        lines += ["", "Operators with the most host time (self, µs a step; calls a step):", "",
                  "| operator | µs | calls |", "|---|---:|---:|"]
        lines += [f"| `{e.key[:90]}` | {e.self_cpu_time_total / stepped:.1f} | {e.count / stepped:.1f} |" for e in top]
    report = run_heading(f", {card}") + "\n".join(lines) + "\n"
    out = args.out or REPO / "results" / f"decode_step_profile_{device.type}.md"
    append_report(out, "Where a decoding step's time goes", "python benchmarks/decode_step_profile.py", report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
