"""`python -m training.study STUDY.json`: train recipes × seeds side by side, score them, one table.

    python -m training.study studies/en-de.json                    # train what is missing, score, report
    python -m training.study studies/en-de.json --time-limit 540   # one short GPU slot; rerun to continue
    python -m training.study studies/en-de.json --report-only      # the table from what is there
    python -m training.study studies/en-de-part1.json --tiny       # dry run at toy size on the CPU

Each (recipe, seed) trains into OUT/NAME/seedK with `python -m training train` (or train-symmetric)
as a child process, `parallel` at a time (small models are kernel-launch bound, so several share
one GPU well). A run with `init` (e.g. fine-tuning the baseline) starts from the model of the run
it names, same seed, with `train --init`; it waits until that model exists, and is not started
when that run fails. A run stopped by the time limit is killed; its checkpoints (every
`checkpoint_interval` updates, written atomically) are where the next invocation resumes it with
`--resume`, which restores the optimiser, schedule, data order and RNG. A finished run is scored
once with `training.evaluate` (cached in OUT/NAME/seedK/eval/), `parallel` jobs at a time, and
with `evaluate.alignment` its alignments with `training.study_alignment`. Training stops
`score_reserve_s` before the time limit so that scoring fits in it too. With `mps` and several
runs on a CUDA device, the CUDA MPS control daemon runs for the invocation (its kernels from
different processes then share the GPU at once instead of in time slices) and is stopped after.
The report (OUT/NAME.md and OUT/NAME.json, NAME the study's) is written at the end of every invocation, so a
partial study reports what it has; study_report.py says what is in it.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Protocol, Sequence

from training.study_spec import (RunSpec, StudyError, StudySpec, eval_file, has_checkpoints, is_trained, load_study,
                                 run_dir, tiny)

PROG = "phrasal-study"
MPS_CONTROL = "/usr/local/nvidia/bin/nvidia-cuda-mps-control"
# Seconds a stopped child gets to exit before it is killed outright.
STOP_GRACE_S = 30.0
POLL_S = 0.5


class Child(Protocol):
    def poll(self) -> int | None: ...

    def send_signal(self, sig: int) -> None: ...

    def kill(self) -> None: ...

    def wait(self, timeout: float | None = None) -> int: ...


Launch = Callable[[list[str], Path], Child]


def initial_model(spec: StudySpec, run: RunSpec, seed: int) -> Path | None:
    """The model directory a run with `init` starts from: the named run's, same seed."""
    if run.init is None:
        return None
    source = spec.run(run.init)
    return run_dir(spec, source, seed) / source.model


def train_command(spec: StudySpec, run: RunSpec, seed: int) -> list[str]:
    out = run_dir(spec, run, seed)
    command = [sys.executable, "-m", "training", run.command, "--recipe", str(run.recipe), "--out", str(out),
               "--device", spec.device, "--quiet", "--set", f"seed={seed}"]
    for key, value in run.overrides.items():
        command += ["--set", f"{key}={json.dumps(value)}"]
    if has_checkpoints(out):
        command.append("--resume")  # a resumed run continues from its checkpoints, not from its init
    elif run.init is not None:
        command += ["--init", str(initial_model(spec, run, seed))]
    return command + list(run.args)


def set_aside_stopped_log(directory: Path) -> Path | None:
    """A job that starts from scratch where an earlier slot stopped it (its checkpoints stayed on
    that device) keeps the old log as log.stopped-N.jsonl: the report reads log.jsonl as one run's
    updates, time and tokens/s."""
    log = directory / "log.jsonl"
    if not log.is_file():
        return None
    number = 1
    while (directory / f"log.stopped-{number}.jsonl").exists():
        number += 1
    return log.rename(directory / f"log.stopped-{number}.jsonl")


def launch_child(command: list[str], log_path: Path) -> Child:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(f"$ {' '.join(command)}\n".encode())
        log.flush()
        # A session of its own: the stop signal reaches the child, not the runner's terminal group.
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


@dataclass
class Outcome:
    """What one invocation did with a job."""

    run: str
    seed: int
    status: str  # "trained", "already trained", "stopped", "failed (exit N)", "not started"


def train_jobs(spec: StudySpec, *, deadline: float | None, launch: Launch = launch_child,
               clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
               say: Callable[[str], None] = lambda line: None) -> list[Outcome]:
    """Train every job that has no model yet, `spec.parallel` at a time, until done or `deadline`
    (a `clock` reading). Jobs that fail are reported and not retried in this invocation. A job with
    `init` waits for the model it starts from; when that job failed or was not started, it is not
    started either."""
    outcomes: dict[tuple[str, int], Outcome] = {}
    waiting: list[tuple[RunSpec, int]] = []
    for run, seed in spec.jobs():
        if is_trained(spec, run, seed):
            outcomes[(run.name, seed)] = Outcome(run.name, seed, "already trained")
        else:
            outcomes[(run.name, seed)] = Outcome(run.name, seed, "not started")
            waiting.append((run, seed))
    running: dict[tuple[str, int], tuple[RunSpec, Child]] = {}

    while waiting or running:
        if deadline is not None and clock() >= deadline:
            for key, (_, child) in running.items():
                child.send_signal(signal.SIGTERM)
            for key, (_, child) in running.items():
                try:
                    child.wait(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
                outcomes[key].status = "stopped"
                say(f"stopped {key[0]} seed {key[1]} at the time limit")
            running.clear()
            break
        while waiting and len(running) < spec.parallel:
            job = _next_ready(spec, waiting, running, outcomes)
            if job is None:
                break
            run, seed = job
            waiting.remove(job)
            command = train_command(spec, run, seed)
            if "--resume" not in command:
                set_aside_stopped_log(run_dir(spec, run, seed))
            running[(run.name, seed)] = (run, launch(command, run_dir(spec, run, seed) / "train.out"))
            outcomes[(run.name, seed)].status = "running"
            say(f"started {run.name} seed {seed}" + (" (resumed)" if "--resume" in command else ""))
        for key, (run, child) in list(running.items()):
            code = child.poll()
            if code is None:
                continue
            del running[key]
            trained = code == 0 and is_trained(spec, run, key[1])
            outcomes[key].status = "trained" if trained else f"failed (exit {code})"
            say(f"{outcomes[key].status}: {key[0]} seed {key[1]}")
        if running:
            sleep(POLL_S)
        elif waiting and _next_ready(spec, waiting, running, outcomes) is None:
            break  # nothing runs and nothing can start (a study file's checks rule this out)
    return list(outcomes.values())


def _next_ready(spec: StudySpec, waiting: list[tuple[RunSpec, int]], running: dict[tuple[str, int], object],
                outcomes: dict[tuple[str, int], Outcome]) -> tuple[RunSpec, int] | None:
    """The first waiting job that can start now. Jobs whose initial model will not come in this
    invocation (its job failed, or itself cannot start) leave `waiting` marked as not started."""
    pending = {(run.name, seed) for run, seed in waiting} | set(running)
    changed = True
    while changed:
        changed = False
        for run, seed in list(waiting):
            if run.init is None or is_trained(spec, spec.run(run.init), seed) or (run.init, seed) in pending:
                continue
            waiting.remove((run, seed))
            pending.discard((run.name, seed))
            outcomes[(run.name, seed)].status = f"not started (init run {run.init} seed {seed} has no model)"
            changed = True
    for run, seed in waiting:
        if run.init is None or is_trained(spec, spec.run(run.init), seed):
            return run, seed
    return None


def last_error(done: subprocess.CompletedProcess) -> str:
    """A failed child's last stderr line (its one-line error), or its exit code when it said nothing."""
    return (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]


def evaluate_command(spec: StudySpec, model_dir: Path, split: str, hyps: Path) -> list[str]:
    """`training.evaluate` of one model on one split as the study scores every system (its beam,
    its one length penalty), the report in JSON on stdout and the hypotheses into `hyps`."""
    data_dir, name = spec.evaluate.locate(split)
    command = [sys.executable, "-m", "training.evaluate", "--model-dir", str(model_dir), "--split", name,
               "--data-dir", str(data_dir), "--beam", str(spec.evaluate.beam),
               "--batch-size", str(spec.evaluate.batch_size), "--device", spec.device, "--out", str(hyps), "--json"]
    if spec.evaluate.limit is not None:
        command += ["--limit", str(spec.evaluate.limit)]
    if spec.evaluate.length_penalty is not None:
        command += ["--length-penalty", str(spec.evaluate.length_penalty)]
    if spec.evaluate.length_penalty_form is not None:
        command += ["--length-penalty-form", spec.evaluate.length_penalty_form]
    return command


def evaluate_job(spec: StudySpec, run: RunSpec, seed: int, *, deadline: float | None,
                 clock: Callable[[], float] = time.monotonic) -> list[str]:
    """Score a trained job on every split not scored yet; returns the splits scored now."""
    directory = run_dir(spec, run, seed)
    model_dir = directory / run.model
    scored = []
    for split in spec.evaluate.splits:
        result = eval_file(directory, split, ".json")
        if result.is_file():
            continue
        if deadline is not None and clock() >= deadline:
            break
        result.parent.mkdir(parents=True, exist_ok=True)
        hyps = result.with_suffix(".hyp")
        done = subprocess.run(evaluate_command(spec, model_dir, split, hyps), capture_output=True, text=True)
        if done.returncode != 0:
            raise StudyError([f"scoring {model_dir} on {split} failed: {last_error(done)}"], str(directory))
        tmp = result.with_suffix(".json.tmp")
        tmp.write_text(done.stdout, encoding="utf-8")
        tmp.replace(result)  # a result file is whole or absent: an interrupted score is redone
        scored.append(split)
    alignment = directory / "eval" / "alignment.json"
    if spec.evaluate.alignment and not alignment.is_file() and (deadline is None or clock() < deadline):
        command = [sys.executable, "-m", "training.study_alignment", "--model-dir", str(model_dir),
                   "--data-dir", str(spec.evaluate.data_dir), "--device", spec.device, "--out", str(alignment)]
        if spec.evaluate.limit is not None:
            command += ["--limit", str(spec.evaluate.limit)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise StudyError([f"aligning with {model_dir} failed: {last_error(done)}"], str(directory))
        scored.append("alignment")
    return scored


def score_jobs(spec: StudySpec, *, deadline: float | None, say: Callable[[str], None] = lambda line: None) -> list[str]:
    """Score every trained job, `spec.parallel` at a time (each a child process); returns the
    problems of the jobs whose scoring failed (the others are scored all the same)."""
    trained = [(run, seed) for run, seed in spec.jobs() if is_trained(spec, run, seed)]

    def score(job: tuple[RunSpec, int]) -> str | None:
        run, seed = job
        try:
            for split in evaluate_job(spec, run, seed, deadline=deadline):
                say(f"scored {run.name} seed {seed} on {split}")
        except StudyError as error:
            say(str(error))
            return str(error)
        return None

    with ThreadPoolExecutor(max_workers=max(1, spec.parallel)) as pool:
        return [problem for problem in pool.map(score, trained) if problem is not None]


@contextlib.contextmanager
def mps_daemon(spec: StudySpec, *, control: str = MPS_CONTROL, say: Callable[[str], None] = lambda line: None):
    """The CUDA MPS control daemon for the invocation, when asked for (`mps`), several runs share
    a CUDA device and the control program exists; its pipe and log directories are private to
    the invocation (the children inherit them through the environment). Stopped on the way out,
    however the invocation ends."""
    wanted = spec.mps and spec.parallel > 1 and spec.device != "cpu"
    if not wanted or not Path(control).is_file():
        if wanted:
            say(f"mps: {control} not found; runs share the GPU in time slices")
        yield False
        return
    directory = Path(tempfile.mkdtemp(prefix="phrasal-mps-"))
    names = {"CUDA_MPS_PIPE_DIRECTORY": directory / "pipe", "CUDA_MPS_LOG_DIRECTORY": directory / "log"}
    saved = {name: os.environ.get(name) for name in names}
    for name, path in names.items():
        path.mkdir()
        os.environ[name] = str(path)
    started = subprocess.run([control, "-d"], capture_output=True, text=True)
    if started.returncode != 0:
        say(f"mps: the daemon did not start (exit {started.returncode}); runs share the GPU in time slices")
    else:
        say("mps: daemon started")
    try:
        yield started.returncode == 0
    finally:
        if started.returncode == 0:
            subprocess.run([control], input="quit\n", capture_output=True, text=True)
            say("mps: daemon stopped")
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(directory, ignore_errors=True)


def run_study(spec: StudySpec, *, time_limit_s: float | None = None, report_only: bool = False,
              say: Callable[[str], None] = lambda line: None) -> Path:
    from training.study_report import write_report

    limit = time_limit_s if time_limit_s is not None else spec.time_limit_s
    deadline = time.monotonic() + limit if limit is not None else None
    # Training gives way to scoring `score_reserve_s` before the end (no more than half the slot).
    train_deadline = deadline - min(spec.score_reserve_s, limit / 2) if deadline is not None else None
    spec.out.mkdir(parents=True, exist_ok=True)
    outcomes: list[Outcome] = []
    problems: list[str] = []
    if not report_only:
        with mps_daemon(spec, say=say):
            outcomes = train_jobs(spec, deadline=train_deadline, say=say)
            problems = score_jobs(spec, deadline=deadline, say=say)
    report = write_report(spec, outcomes)
    if problems:
        raise StudyError(problems + [f"the report of what was scored is in {report}"], spec.name)
    return report


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        raise StudyError([message], PROG)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Train recipes x seeds side by side, score them, write one table.")
    p.add_argument("study", type=Path, help="study JSON (studies/*.json)")
    p.add_argument("--time-limit", type=float, metavar="S", help="stop training after S seconds (overrides the study's)")
    p.add_argument("--parallel", type=int, help="runs side by side (overrides the study's)")
    p.add_argument("--device", help="auto, cpu or cuda (overrides the study's)")
    p.add_argument("--report-only", action="store_true", help="train and score nothing; write the table")
    p.add_argument("--tiny", action="store_true",
                   help="a dry run at toy size on the CPU into OUT-tiny (training.study_spec.TINY_SET)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        spec = load_study(args.study)
        if args.tiny:
            spec = tiny(spec)
        if args.parallel is not None:
            if args.parallel < 1:
                raise StudyError(["--parallel must be >= 1"], PROG)
            spec = replace(spec, parallel=args.parallel)
        if args.device is not None:
            spec = replace(spec, device=args.device)
        if args.time_limit is not None and args.time_limit <= 0:
            raise StudyError(["--time-limit must be > 0"], PROG)
        report = run_study(spec, time_limit_s=args.time_limit, report_only=args.report_only,
                           say=lambda line: print(line, file=sys.stderr, flush=True))
    except StudyError as error:
        print(f"{PROG}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; rerun to continue", file=sys.stderr)
        return 130
    print(report)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
