"""`python -m training.study_partial STUDY [--tiny] [--time-limit S]`: score the runs a slot stopped.

A study part whose trainings outrun its time limit leaves them as checkpoints, which do not come
back from a lent GPU (studies/gpu/README.md), so the slot would return nothing to compare. Here each
stopped run's newest checkpoints (up to its recipe's `average_last`) are averaged into
RUN/partial/model and scored on the study's first split, with the study's beam and length penalty:
RUN/partial/eval/SPLIT.json and .hyp. OUT/NAME-partial.md lists runs, seeds, the update each reached
and BLEU (mean ± std over seeds). These are systems compared at the same point of an unfinished
recipe, not the study's results; the runner never reads RUN/partial, and a later slot trains the
run again from the start.

Symmetric runs (two models in one loop) are left out. Jobs start until the time limit, each at
most `parallel` at a time; a started job finishes (the slot's script bounds it with `timeout`).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

from training import checkpoints as ckpt
from training.study import evaluate_command, last_error
from training.study_report import mean_std
from training.study_spec import (RunSpec, StudyError, StudySpec, eval_file, has_checkpoints, is_trained, load_study,
                                 run_dir, tiny)
from training.usage import OneLineParser

PROG = "phrasal-study-partial"
PARTIAL = "partial"


def stopped_jobs(spec: StudySpec) -> list[tuple[RunSpec, int]]:
    """Jobs with checkpoints and no finished model, trained by the one-model loop."""
    return [(run, seed) for run, seed in spec.jobs()
            if run.command == "train" and not is_trained(spec, run, seed) and has_checkpoints(run_dir(spec, run, seed))]


def averaged_count(directory: Path, checkpoints: int) -> int:
    """How many checkpoints the run's recipe averages for its model, at most the `checkpoints` it has."""
    recipe = json.loads((directory / "recipe.json").read_text(encoding="utf-8"))
    return max(1, min(int(recipe.get("average_last", 1)), checkpoints))


def score_stopped(spec: StudySpec, run: RunSpec, seed: int) -> dict:
    """Average the stopped run's newest checkpoints and score them on the study's first split."""
    directory = run_dir(spec, run, seed)
    checkpoints = ckpt.list_checkpoints(directory / "checkpoints")  # oldest first
    updates = ckpt.checkpoint_step(checkpoints[-1])
    model_dir = directory / PARTIAL / "model"
    split = spec.evaluate.splits[0]
    result = eval_file(directory / PARTIAL, split, ".json")
    row = {"run": run.name, "seed": seed, "updates": updates, "bleu": None}
    average = [sys.executable, "-m", "training", "average", "--run", str(directory),
               "--last", str(averaged_count(directory, len(checkpoints))), "--out", str(model_dir), "--fp16"]
    done = subprocess.run(average, capture_output=True, text=True)
    if done.returncode != 0:
        row["problem"] = last_error(done)
        return row
    result.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(evaluate_command(spec, model_dir, split, result.with_suffix(".hyp")),
                          capture_output=True, text=True)
    if done.returncode != 0:
        row["problem"] = last_error(done)
        return row
    result.write_text(done.stdout, encoding="utf-8")
    row["bleu"] = json.loads(done.stdout)["bleu"]["score"]
    return row


def render(spec: StudySpec, rows: list[dict]) -> str:
    split = spec.evaluate.splits[0]
    lines = [f"# {spec.name}: runs stopped by the time limit, scored where they stopped",
             "",
             f"Each run's newest checkpoints averaged (up to its recipe's `average_last`), {split}, "
             f"beam {spec.evaluate.beam}, the study's length penalty. Not the study's results: the recipes "
             "were not finished (`python -m training.study_partial`).",
             "",
             f"| run | seeds | updates | BLEU {split} |",
             "|---|---|---|---|"]
    for name in dict.fromkeys(row["run"] for row in rows):
        mine = [row for row in rows if row["run"] == name]
        updates = sorted({row["updates"] for row in mine})
        span = str(updates[0]) if len(updates) == 1 else f"{updates[0]}–{updates[-1]}"
        bleu = mean_std([row["bleu"] for row in mine])
        cell = "–" if bleu is None else (f"{bleu[0]:.2f}" + (f" ± {bleu[1]:.2f}" if bleu[1] is not None else ""))
        lines.append(f"| {name} | {', '.join(str(row['seed']) for row in mine)} | {span} | {cell} |")
    problems = [f"- {row['run']} seed {row['seed']}: {row['problem']}" for row in rows if row.get("problem")]
    return "\n".join(lines + ([""] + problems if problems else [])) + "\n"


def score_partial(spec: StudySpec, *, time_limit_s: float | None = None, say=lambda line: None) -> Path | None:
    """Score every stopped job (until the time limit) and write OUT/NAME-partial.md; None when no
    job was stopped."""
    jobs = stopped_jobs(spec)
    if not jobs:
        return None
    deadline = time.monotonic() + time_limit_s if time_limit_s is not None else None

    def one(job: tuple[RunSpec, int]) -> dict | None:
        run, seed = job
        if deadline is not None and time.monotonic() >= deadline:
            return None
        row = score_stopped(spec, run, seed)
        say(f"{run.name} seed {seed} at {row['updates']} updates: BLEU {row['bleu']}" +
            (f" ({row['problem']})" if row.get("problem") else ""))
        return row

    with ThreadPoolExecutor(max_workers=max(1, spec.parallel)) as pool:
        rows = [row for row in pool.map(one, jobs) if row is not None]
    path = spec.out / f"{spec.name}-partial.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(spec, rows), encoding="utf-8")
    return path


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=PROG, description="Score the runs of a study part that its time limit stopped.")
    p.add_argument("study", type=Path, help="the study part, e.g. studies/en-de-part1.json")
    p.add_argument("--tiny", action="store_true", help="the part's dry-run form (training.study --tiny)")
    p.add_argument("--time-limit", type=float, metavar="S", help="start no scoring after S seconds")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.time_limit is not None and args.time_limit <= 0:
            raise StudyError(["--time-limit must be > 0"], PROG)
        spec = load_study(args.study)
        spec = tiny(spec) if args.tiny else spec
        path = score_partial(spec, time_limit_s=args.time_limit, say=lambda line: print(line, flush=True))
    except StudyError as error:
        print(f"{PROG}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    print(f"no run was stopped in {spec.out}" if path is None else f"table: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
