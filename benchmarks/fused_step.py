"""The decoder step in one kernel call (model/decoding/kernel_backend.py, FusedStep) against one
call per layer, int8 and float32; and a linear layer alone: PyTorch's dynamic int8 operator (one
input scale per call, so other numbers) against decoding.c's int8 kernel (model/int8_linear.py,
one scale per row; checked equal to its reference), and PyTorch's float32 GEMM against decoding.c's
float_linear (equal up to rounding).

    python benchmarks/fused_step.py                       # the bundled en-de model, int8 and float32
    python benchmarks/fused_step.py --precisions int8 --searches 1x1,5x1,5x32 --sentences 96 --rows 1,16
    python benchmarks/fused_step.py --march haswell --precisions float32   # as on an AVX2 machine

Whole searches: the bundled model through the kernel backend, the first --sentences
test_2016_flickr sentences in batches, each (beam x batch) run fused and per layer after a warm-up
run, milliseconds for all and how many top hypotheses are identical (int8: all, the same numbers;
float32: the same up to rounding). Per layer shape (in x out, the model's: self-attention q/k/v
fused, the other projections, the feed-forward's two layers, the output projection) and rows:
microseconds per call of the int8 operator and kernel (and whether the kernel's output equals its
reference's) and of float32 F.linear and float_linear, called as a search calls them. One thread.
Appends to results/fused_step_cpu.md.
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.host import append_report, run_heading  # noqa: E402

SHAPES = ((128, 384), (128, 128), (128, 256), (256, 128), (128, 10000))
# --march: a kind of machine other than this one, and the MKL and ATen settings that keep
# PyTorch within its vector width.
OTHER_MACHINES = {"haswell": ("AVX2", "avx2"), "x86-64": ("SSE4_2", "default")}


def per_call_us(function, x, calls: int) -> float:
    for _ in range(max(10, calls // 20)):
        function(x)
    began = time.perf_counter()
    for _ in range(calls):
        function(x)
    return 1e6 * (time.perf_counter() - began) / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--searches", default="1x1,5x1,1x8,5x2,1x16,5x4,1x32,5x8,5x16,5x32,5x64",
                        help="beam x batch pairs of the whole-search comparison")
    parser.add_argument("--sentences", type=int, default=96)
    parser.add_argument("--precisions", default="int8,float32")
    parser.add_argument("--rows", default="1,2,5,10,16,32,160")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--results", type=Path, default=REPO / "results" / "fused_step_cpu.md")
    parser.add_argument("--march", choices=sorted(OTHER_MACHINES),
                        help="run as on a machine of that kind: the kernels built for it (-march), PyTorch's "
                             "MKL and ATen limited to its vector width (float32 only: fbgemm picks its own)")
    args = parser.parse_args()
    if args.march:  # read when torch loads
        os.environ["MKL_ENABLE_INSTRUCTIONS"], os.environ["ATEN_CPU_CAPABILITY"] = OTHER_MACHINES[args.march]

    import torch
    from torch import nn

    import torch.nn.functional as F

    from model.int8_linear import Int8Linear, agreement_problem, reference
    from model.decoding.kernel_backend import float_function

    torch.set_num_threads(1)
    build = ""
    if args.march:
        import tempfile

        import model.cpu_kernels as cpu_kernels

        cpu_kernels.use(cpu_kernels.build_for(args.march, Path(tempfile.mkdtemp())))
        build = (f" Kernels built with -march={args.march}; MKL_ENABLE_INSTRUCTIONS={OTHER_MACHINES[args.march][0]}, "
                 f"ATEN_CPU_CAPABILITY={OTHER_MACHINES[args.march][1]}.")
    problem = agreement_problem()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    rows_list = [int(r) for r in args.rows.split(",")]
    searches = [line for precision in args.precisions.split(",")
                for line in searches_table(args.searches, args.sentences, precision)]
    lines = []
    torch.manual_seed(0)
    with torch.inference_mode():
        for in_features, out_features in SHAPES:
            layer = nn.Linear(in_features, out_features)
            module = Int8Linear.quantize(layer.weight, layer.bias)
            kernel = module.function()
            operator = torch.ao.quantization.quantize_dynamic(nn.Sequential(layer), {nn.Linear}, dtype=torch.qint8)[0]
            floats = float_function(layer.weight, layer.bias)
            for rows in rows_list:
                x = torch.randn(rows, in_features)
                calls = args.calls if out_features < 1000 else max(200, args.calls // 10)
                float_gemm = per_call_us(lambda x: F.linear(x, layer.weight, layer.bias), x, calls)
                float_ours = per_call_us(floats, x, calls)
                theirs = per_call_us(operator, x, calls)
                ours = per_call_us(kernel, x, calls)
                equal = torch.equal(kernel(x), reference(x, module.weight, module.weight_scale, module.bias))
                lines.append(f"| {in_features} x {out_features} | {rows} | {theirs:.1f} | {ours:.1f} | "
                             f"{theirs / ours:.2f} | {'yes' if equal else '**no**'} | {float_gemm:.1f} | "
                             f"{float_ours:.1f} | {float_gemm / float_ours:.2f} |")
    command = "python benchmarks/fused_step.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    report = (
        f"{run_heading()}    {command.strip()}\n\n"
        f"torch {torch.__version__}, engine {torch.backends.quantized.engine}, one thread.{build}\n\n"
        f"Whole searches, models/en-de, the first {args.sentences} test_2016_flickr sentences:\n\n"
        "| precision | beam | batch | fused ms | per layer ms | per layer / fused | identical top hypotheses |\n"
        "|---|---:|---:|---:|---:|---:|---|\n" + "\n".join(searches) + "\n\n"
        "One layer alone:\n\n"
        "| layer (in x out) | rows | int8 operator µs | int8 kernel µs | operator / kernel | kernel = reference | "
        "float32 F.linear µs | float_linear µs | F.linear / float_linear |\n"
        "|---|---:|---:|---:|---:|---|---:|---:|---:|\n" + "\n".join(lines) + "\n"
    )
    print(report)
    append_report(args.results, "The decoder step in one kernel call, and the int8 linear layer alone",
                  "python benchmarks/fused_step.py", report)
    return 0


def searches_table(pairs: str, sentences: int, precision: str) -> list[str]:
    import gzip

    import torch

    from model.decoding.generate import generate, pad_sources
    from model.decoding.kernel_backend import KernelBackend
    from model.decoding.options import DecodingOptions
    from model.model_dir import load_model_dir
    from model.quantization import quantize_int8

    loaded = load_model_dir(REPO / "models" / "en-de")
    config = loaded.config
    model = quantize_int8(loaded.model) if precision == "int8" else loaded.model
    with gzip.open(REPO / "data" / "multi30k" / "test_2016_flickr.en.gz", "rt", encoding="utf-8") as handle:
        texts = [line.strip() for _, line in zip(range(sentences), handle)]
    ids = loaded.tokenizer.encode_batch(texts)
    fused, per_layer = KernelBackend(model), KernelBackend(model)
    per_layer._fused_step = None
    if fused._fused_step is None:
        raise SystemExit(f"error: this machine runs no fused {precision} step (model/decoding/kernel_backend.py)")
    lines = []
    for pair in pairs.split(","):
        beam, batch = (int(part) for part in pair.split("x"))
        timings, outputs = [], []
        for backend in (fused, per_layer):
            def run() -> list[list[int]]:
                out = []
                for start in range(0, len(ids), batch):
                    src = pad_sources([x + [config.eos_id] for x in ids[start:start + batch]], config.pad_id,
                                      torch.device("cpu"))
                    out += [h[0].tokens for h in generate(backend, src, DecodingOptions(beam_size=beam))]
                return out

            run()
            began = time.perf_counter()
            outputs.append(run())
            timings.append(1000 * (time.perf_counter() - began))
        identical = sum(a == b for a, b in zip(*outputs))
        lines.append(f"| {precision} | {beam} | {batch} | {timings[0]:.0f} | {timings[1]:.0f} | "
                     f"{timings[1] / timings[0]:.2f} | {identical}/{len(outputs[0])} |")
        print(lines[-1], flush=True)
    return lines


if __name__ == "__main__":
    sys.exit(main())
