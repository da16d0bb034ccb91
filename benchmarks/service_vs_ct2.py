"""The running service against CTranslate2 int8 on the CPU, run in turns: the figure issue 30 sets
a target for (the service >= 1.0x CTranslate2 int8, one thread, whole batches, same sentences).

    python benchmarks/service_vs_ct2.py                 # 3 rounds, the service's default; appends to results/service_vs_ct2_cpu.md
    python benchmarks/service_vs_ct2.py --rounds 5 --quantization none

One round is the service through `benchmarks/load.py --serve` (one client sending 32 of the same
sentences a request, beam 5, `OMP_NUM_THREADS=1`), then our engine alone (`benchmarks/engines.py`
torch-int8-kernels or torch-kernels: the service's decoder, called directly with whole batches of 32, one thread),
then CTranslate2 int8 through `benchmarks/engines.py` (one thread, one `translate_batch` per batch
of 32, beam 5, test_2016_flickr), each in its own processes; a CTranslate2 run also comes first. On
a shared 2-core machine either engine's speed moves by 10-20 % from one minute to the next, more
than the difference measured here, so a single pair decides nothing: each round's ratios are the
service's and our engine's speed against the mean of the CTranslate2 runs just before and after
them, and the table gives every run, the median ratios and their ranges. The two ratios apart say
what the engine gives and what the service around it (HTTP, the request path, the inference
process) costs.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import engines, load  # noqa: E402
from benchmarks.host import cpu_name  # noqa: E402


def engine_speed(engine: str, model_dir: str, work_dir: str, sentences: int) -> float:
    """An engine of benchmarks/engines.py's sentences/s: one thread, beam 5, batches of 32."""
    with tempfile.TemporaryDirectory() as folder:
        rows = engines.main(["--model-dir", model_dir, "--sizes", "bundled", "--engines", engine, "--beams", "5",
                             "--batch-sizes", "32", "--sentences", str(sentences), "--work-dir", work_dir,
                             "--results", f"{folder}/engines.md", "--json", f"{folder}/rows.json"])
    return float(rows[0]["sentences_per_s"])


def ct2_speed(model_dir: str, work_dir: str, sentences: int) -> float:
    """CTranslate2 int8's sentences/s, one thread, beam 5, batches of 32."""
    return engine_speed("ct2-int8", model_dir, work_dir, sentences)


# The decoder the service runs for each PHRASAL_CPU_QUANTIZATION, as an engine of benchmarks/engines.py.
SERVICE_ENGINE = {"int8": "torch-int8-kernels", "none": "torch-kernels"}


def served_precision(model_dir: str, quantization: str) -> str:
    """What the service decodes `model_dir` in for `quantization`, "int8" or "none" (float32): the
    service's own decision (service/runtime/torch_runtime.py cpu_model)."""
    import torch

    from model.model_dir import load_model_dir
    from service.runtime.torch_runtime import cpu_model

    _, precision, _ = cpu_model(model_dir, load_model_dir(model_dir, device="cpu"), torch.device("cpu"), quantization)
    return "int8" if precision == "int8" else "none"


def ours_speed(model_dir: str, work_dir: str, sentences: int, quantization: str = "int8") -> float:
    """The service's decoder through the C kernels, called directly, the same way."""
    return engine_speed(SERVICE_ENGINE[quantization], model_dir, work_dir, sentences)


def service_speed(model_dir: str, quantization: str, duration: float) -> float:
    """The service's segments/s: one client, 32 texts a request, beam 5."""
    argv = ["--serve", "--batching", "on", "--model-dir", model_dir, "--device", "cpu", "--clients", "1",
            "--texts-per-request", "32", "--beam-size", "5", "--duration", str(duration), "--warmup", "5",
            "--server-env", "OMP_NUM_THREADS=1"]
    argv += ["--server-env", f"PHRASAL_CPU_QUANTIZATION={quantization}"]
    args = load.parse_args(argv)
    (level,) = asyncio.run(load.main_async(args, argv))
    if level.errors:
        raise SystemExit(f"the service answered with errors: {level.errors}")
    return level.segments / level.seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model-dir", default="models/en-de")
    parser.add_argument("--quantization", choices=["auto", "int8", "none"], default="auto",
                        help="the service's PHRASAL_CPU_QUANTIZATION (auto, its default: int8 where the model "
                        "verified it; none: float32)")
    parser.add_argument("--duration", type=float, default=40.0, help="the service's measured seconds a round")
    parser.add_argument("--sentences", type=int, default=1000, help="CTranslate2's sentences a run")
    parser.add_argument("--work-dir", default=None, help="where the CTranslate2 export is kept (default: a temporary one)")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "service_vs_ct2_cpu.md")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds: at least 1")
    command = "python benchmarks/service_vs_ct2.py " + " ".join(argv if argv is not None else sys.argv[1:])
    served = served_precision(args.model_dir, args.quantization)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory() as scratch:
        work_dir = args.work_dir or scratch
        ct2 = [ct2_speed(args.model_dir, work_dir, args.sentences)]
        service, ours = [], []
        for _ in range(args.rounds):
            service.append(service_speed(args.model_dir, args.quantization, args.duration))
            ours.append(ours_speed(args.model_dir, work_dir, args.sentences, served))
            ct2.append(ct2_speed(args.model_dir, work_dir, args.sentences))
    around = [(before + after) / 2 for before, after in zip(ct2, ct2[1:])]
    ratios = [s / c for s, c in zip(service, around)]
    engine_ratios = [o / c for o, c in zip(ours, around)]
    lines = [f"## {started}: {cpu_name()}, {os.cpu_count()} logical CPUs", "", f"    {command}", "",
             f"Service: {args.model_dir}, PHRASAL_CPU_QUANTIZATION={args.quantization} ({served}), one client, 32 texts a request, "
             f"beam 5, {args.duration:.0f} s a round. CTranslate2: int8, one thread, batches of 32, beam 5, "
             f"{args.sentences} test_2016_flickr sentences.", "",
             "| round | CTranslate2 before (sent/s) | service (segments/s) | our engine (sent/s) | CTranslate2 after "
             "| service × CTranslate2 | engine × CTranslate2 |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {i + 1} | {ct2[i]:.1f} | {s:.1f} | {o:.1f} | {ct2[i + 1]:.1f} | {r:.2f} | {e:.2f} |"
              for i, (s, o, r, e) in enumerate(zip(service, ours, ratios, engine_ratios))]
    lines += ["", f"**Service: median {statistics.median(ratios):.2f}× CTranslate2 int8** (range "
              f"{min(ratios):.2f}–{max(ratios):.2f}); our engine alone ({SERVICE_ENGINE[served]}): median "
              f"{statistics.median(engine_ratios):.2f}× (range {min(engine_ratios):.2f}–{max(engine_ratios):.2f}).", ""]
    report = "\n".join(lines)
    new = not args.out.exists()
    with args.out.open("a", encoding="utf-8") as handle:
        if new:
            handle.write("# The service against CTranslate2 int8 on the CPU (benchmarks/service_vs_ct2.py)\n\n")
        handle.write(report + "\n")
    print(report)
    print(json.dumps({"service": service, "ours": ours, "ct2": ct2, "ratios": ratios, "engine_ratios": engine_ratios}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
