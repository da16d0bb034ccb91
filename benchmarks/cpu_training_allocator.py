"""CPU training with glibc's default allocator against every block kept in the heap (what training
does on the CPU: model/cpu_allocator.py, `retain_freed_memory(heap_only=True)` in
training.loop.resolve_device).

    python benchmarks/cpu_training_allocator.py                  # the software recipe, 200 updates, 2 rounds
    python benchmarks/cpu_training_allocator.py --updates 100 --rounds 1 --recipe recipes/smoke.json --spm ''

Each run trains the recipe from scratch in its own process (the same seed, so the same batches),
the two allocators in turns, `OMP_NUM_THREADS` at the machine's cores. Reported per run: training
tokens/s (the median of the logged intervals after the first), the process's minor page faults, its
user and system CPU seconds, its peak RSS, and whether its logged losses equal the first run's
(the allocator must not change a number). Appends to results/cpu_training_allocator.md.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.host import append_report, run_heading  # noqa: E402

ALLOCATORS = ("system", "heap")
DEFAULT_RECIPE = "recipes/transformer-tiny-software-en-de-cpu.json"
DEFAULT_SPM = "models/en-de-software/spm.model"


def child(allocator: str, recipe_path: str, updates: int, spm: str) -> dict:
    """One training run in this process; `system` leaves glibc's allocator as it is."""
    from training import loop
    from training.recipe import load_recipe

    if allocator == "system":
        loop.retain_freed_memory = lambda heap_only=False: False
    settings = {"max_updates": updates, "val_interval": 10 * updates, "val_bleu_sentences": 0,
                "checkpoint_interval": 10 * updates, "log_interval": max(updates // 8, 1)}
    recipe = load_recipe(REPO / recipe_path, [f"{k}={json.dumps(v)}" for k, v in settings.items()])
    with tempfile.TemporaryDirectory(prefix="phrasal-allocator-") as tmp:
        started = time.perf_counter()
        result = loop.train(recipe, Path(tmp) / "run", device="cpu", progress=False, export=False,
                            spm=(REPO / spm) if spm else None)
        seconds = time.perf_counter() - started
    train_events = [e for e in result.events if e["event"] == "train"]
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"allocator": allocator, "tokens_per_s": statistics.median(e["tokens_per_s"] for e in train_events[1:] or train_events),
            "losses": [e["loss"] for e in train_events], "seconds": seconds, "minor_faults": usage.ru_minflt,
            "user_s": usage.ru_utime, "system_s": usage.ru_stime, "peak_mib": usage.ru_maxrss / 1024}


def run(allocator: str, args: argparse.Namespace) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    out = subprocess.run([sys.executable, __file__, "--child", allocator, "--recipe", args.recipe,
                          "--updates", str(args.updates), "--spm", args.spm],
                         env=env, cwd=REPO, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"the {allocator} run failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default=DEFAULT_RECIPE)
    parser.add_argument("--spm", default=DEFAULT_SPM,
                        help="a SentencePiece model to use instead of training one ('' trains the recipe's)")
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--child", choices=ALLOCATORS, help=argparse.SUPPRESS)
    parser.add_argument("--results", type=Path, default=REPO / "results" / "cpu_training_allocator.md")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.recipe, args.updates, args.spm)))
        return 0
    if args.updates < 2 or args.rounds < 1:
        parser.error("--updates: at least 2; --rounds: at least 1")

    runs = [run(allocator, args) for _ in range(args.rounds) for allocator in ALLOCATORS]
    reference = runs[0]["losses"]
    rows = [f"| {r['allocator']} | {r['tokens_per_s']:,.0f} | {r['minor_faults']:,} | {r['user_s']:.1f} | "
            f"{r['system_s']:.1f} | {r['peak_mib']:,.0f} | {'yes' if r['losses'] == reference else 'NO'} |" for r in runs]
    speed = {a: statistics.median(r["tokens_per_s"] for r in runs if r["allocator"] == a) for a in ALLOCATORS}
    command = shlex.join(["python", "benchmarks/cpu_training_allocator.py", *sys.argv[1:]])
    report = (
        f"{run_heading()}    {command.strip()}\n\n"
        f"{args.recipe}, {args.updates} updates from scratch a run, OMP_NUM_THREADS={args.threads}, the runs in "
        f"the order listed. system: glibc's defaults; heap: every block from the heap and kept (what training does "
        f"on the CPU).\n\n"
        "| allocator | tokens/s | minor page faults | user CPU s | system CPU s | peak RSS MiB | losses = first run's |\n"
        "|---|---:|---:|---:|---:|---:|---|\n" + "\n".join(rows) + "\n\n"
        f"**heap: {speed['heap'] / speed['system']:.2f}× the tokens/s of system** (medians).\n"
    )
    print(report)
    append_report(args.results, "CPU training: glibc's allocator against every block kept in the heap",
                  "python benchmarks/cpu_training_allocator.py", report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
