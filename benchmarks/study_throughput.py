"""Aggregate training throughput of N runs sharing one device: what a study slot gets done.

    python benchmarks/study_throughput.py --runs 8 --updates 300 --device cuda            # time-sliced
    python benchmarks/study_throughput.py --runs 8 --updates 300 --device cuda --mps      # CUDA MPS
    python benchmarks/study_throughput.py --runs 8 --updates 300 --device cuda --mps --set compile=true
    python benchmarks/study_throughput.py ... --set compile=true --set compile_mode=reduce-overhead   # CUDA graphs
    python benchmarks/study_throughput.py --runs 2 --updates 6 --device cpu --tiny        # a dry run

Starts N `python -m training train` processes of one recipe (default the baseline's,
recipes/transformer-tiny-en-de.json; seeds 1..N, so each has its own batches) at once, no
export, and reads each run's log.jsonl: the aggregate tokens/s is every run's target tokens over
the wall time from the first start to the last finish (process start, data and SentencePiece
model included, as in a study), beside the mean of each run's own training tokens/s and ms an update
(compiling included) and the median run's pace once past its first log interval. --mps runs the
CUDA MPS daemon while they train (training/study.py `mps_daemon`); --set passes recipe keys, the
levers among them (optimizer_implementation, compile, compile_mode). The target of issue 32: 8 systems ×
8,000 updates in 8 minutes on one H100. Appends a row to results/study_throughput_DEVICE.md.
No figures from a shared CPU: its numbers say only that the command works.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TINY = {"train_limit": 300, "spm_vocab_size": 400, "max_tokens": 1024, "val_bleu_sentences": 0}


def run_group(recipe: Path, runs: int, updates: int, device: str, overrides: dict, root: Path) -> dict:
    common = {"max_updates": updates, "val_interval": updates, "checkpoint_interval": updates, "log_interval": 10,
              "val_bleu_sentences": 0, **overrides}
    started = time.perf_counter()
    children = []
    for seed in range(1, runs + 1):
        command = [sys.executable, "-m", "training", "train", "--recipe", str(recipe), "--out", str(root / f"run{seed}"),
                   "--device", device, "--quiet", "--no-export", "--set", f"seed={seed}"]
        command += [arg for key, value in common.items() for arg in ("--set", f"{key}={json.dumps(value)}")]
        children.append(subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    failures = [child.communicate()[1].strip().splitlines()[-1:] for child in children if child.wait() != 0]
    wall = time.perf_counter() - started
    if failures:
        raise SystemExit(f"a run failed: {failures[0]}")
    from training.study_report import training_figures

    # Each run's tokens, its own training tokens/s and ms an update, as the study's report gives them.
    figures = [training_figures(root / f"run{seed}") for seed in range(1, runs + 1)]
    tokens = sum(f["tokens"] for f in figures)
    steady = [f["steady_ms_per_update"] for f in figures if f["steady_ms_per_update"] is not None]
    return {"wall_s": wall, "tokens": tokens, "aggregate_tokens_per_s": tokens / wall,
            "mean_run_tokens_per_s": sum(f["tokens_per_s"] for f in figures) / runs,
            "mean_ms_per_update": sum(f["ms_per_update"] for f in figures) / runs,
            "steady_ms_per_update": statistics.median(steady) if steady else None}


def main() -> int:
    from training.study import mps_daemon
    from training.study_spec import StudySpec

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", type=Path, default=REPO / "recipes" / "transformer-tiny-en-de.json")
    p.add_argument("--runs", type=int, default=8)
    p.add_argument("--updates", type=int, default=300)
    p.add_argument("--device", default="cuda")
    p.add_argument("--mps", action="store_true", help="run the CUDA MPS daemon while they train")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--tiny", action="store_true", help="toy data sizes (a dry run of the command)")
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    overrides = dict(TINY) if args.tiny else {}
    for item in args.overrides:
        key, _, raw = item.partition("=")
        try:
            overrides[key] = json.loads(raw)
        except json.JSONDecodeError:
            overrides[key] = raw
    spec = StudySpec("throughput", Path("."), (), parallel=args.runs, device=args.device, mps=args.mps)
    with tempfile.TemporaryDirectory(prefix="phrasal-throughput-") as tmp, \
            mps_daemon(spec, say=lambda line: print(line, file=sys.stderr)) as mps:
        result = run_group(args.recipe, args.runs, args.updates, args.device, overrides, Path(tmp))
    if args.device.startswith("cuda"):
        import torch

        card = torch.cuda.get_device_name(0)
    else:
        card = "CPU"
    steady = "—" if result["steady_ms_per_update"] is None else f"{result['steady_ms_per_update']:.1f}"  # one interval only
    row = (f"| {card} | {args.recipe.name} | {args.runs} | {args.updates} | {'on' if mps else 'off'} | "
           f"{' '.join(args.overrides) or '—'} | {result['wall_s']:.1f} | {result['aggregate_tokens_per_s']:.0f} | "
           f"{result['mean_run_tokens_per_s']:.0f} | {result['mean_ms_per_update']:.1f} | "
           f"{steady} |")
    print(row)
    out = args.out or REPO / "results" / f"study_throughput_{args.device.split(':')[0]}.md"
    if not args.tiny:
        if not out.is_file():
            out.write_text("# Aggregate training throughput of runs sharing one device\n\n"
                           "Command: `python benchmarks/study_throughput.py --runs N --updates U --device D [--mps] "
                           "[--set KEY=VALUE]` (one row per invocation).\n\n"
                           "| device | recipe | runs | updates | MPS | levers | wall s | aggregate tokens/s | "
                           "tokens/s per run | ms an update per run | the same, median interval but the first |\n"
                           "|---|---|---:|---:|---|---|---:|---:|---:|---:|---:|\n",
                           encoding="utf-8")
        with open(out, "a", encoding="utf-8") as handle:
            handle.write(row + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
