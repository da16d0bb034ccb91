"""What a study is: recipes × seeds, how many train side by side, how long a slot lasts, and how
the results are scored. Read from one JSON file (studies/*.json); every problem is reported at once.

    {
      "name": "en-de",
      "out": "runs/study-en-de",
      "parallel": 3,
      "time_limit_s": 540,
      "seeds": [1, 2, 3],
      "evaluate": {"splits": ["test_2016_flickr", "test_2017_flickr"], "beam": 5, "baseline": "baseline"},
      "runs": [
        {"name": "baseline", "recipe": "recipes/transformer-tiny-en-de.json"},
        {"name": "queryk-1-2-3", "recipe": "recipes/queryk-heterogeneous-1-2-3-tiny-en-de.json", "seeds": [1]},
        {"name": "sym", "recipe": "recipes/symmetric-tiny-en-de.json", "command": "train-symmetric",
         "model": "models/en-de"},
        {"name": "glofer-pre", "recipe": "recipes/global-fertility-finetune-tiny-en-de.json", "init": "baseline"}
      ]
    }

`set` on a run (or on the study, for every run) overrides recipe keys as `--set` does; `args` adds
training CLI arguments (e.g. ["--init", "models/en-de"]); `model` is the model directory inside the
run directory that is scored ("model" for `train`, "models/SRC-TGT" for `train-symmetric`); `init`
names another run of the study whose model, of the same seed, the run starts from (`train --init`):
the job waits until that one is trained, and every seed of the run must be a seed of that run.
`evaluate.length_penalty` / `evaluate.length_penalty_form` score every run with one length
penalty (decoding held fixed across systems); left out, each model decodes as its own recipe says
(`decode_length_penalty[_form]`: the phrasal recipes GNMT 0.6, the baseline |y|^1).
`evaluate.alignment: true` also scores each model's alignments (training.study_alignment: gold AER
with its own best method, and agreement with eflomal in domain).
`mps: true` starts the CUDA MPS daemon while several runs share the GPU (training.study);
`score_reserve_s` stops training that many seconds before the time limit, so that what trained
is also scored within it.
Relative paths are read from the directory the runner is started in.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from model.decoding.length_penalty import FORMS

COMMANDS = ("train", "train-symmetric")
_STUDY_KEYS = {"name", "out", "parallel", "time_limit_s", "seeds", "device", "set", "evaluate", "runs", "mps",
               "score_reserve_s"}
_RUN_KEYS = {"name", "recipe", "seeds", "set", "args", "command", "model", "init"}
_EVALUATE_KEYS = {"splits", "beam", "baseline", "data_dir", "bootstrap_samples", "batch_size", "limit", "length_penalty",
                  "length_penalty_form", "alignment"}


class StudyError(ValueError):
    def __init__(self, problems: list[str], source: str):
        super().__init__(f"{source}: " + "; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class RunSpec:
    name: str
    recipe: Path
    seeds: tuple[int, ...]
    overrides: dict[str, Any] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    command: str = "train"
    model: str = "model"
    init: str | None = None  # the run (of the same study, same seed) whose model this one starts from


@dataclass(frozen=True)
class EvaluateSpec:
    splits: tuple[str, ...] = ("test_2016_flickr", "test_2017_flickr")
    beam: int = 5
    baseline: str | None = None
    data_dir: Path = Path("data/multi30k")
    bootstrap_samples: int = 1000
    batch_size: int = 64
    limit: int | None = None  # first N sentences of each split (a reduced study)
    # One length penalty for every run (a comparison that holds decoding fixed); None: each model
    # decodes as its own recipe says (the papers' systems as their papers decode them).
    length_penalty: float | None = None
    length_penalty_form: str | None = None
    alignment: bool = False  # also score alignments (training.study_alignment)

    def locate(self, split: str) -> tuple[Path, str]:
        """(data directory, split name): a split written as a path (`data/debian_catalogs/test`, a
        second domain) names its own directory; a bare name is one of `data_dir`'s."""
        if "/" in split:
            return Path(split).parent, Path(split).name
        return self.data_dir, split


@dataclass(frozen=True)
class StudySpec:
    name: str
    out: Path
    runs: tuple[RunSpec, ...]
    evaluate: EvaluateSpec = EvaluateSpec()
    parallel: int = 1
    time_limit_s: float | None = None
    device: str = "auto"
    mps: bool = False  # the CUDA MPS daemon while runs share the GPU
    score_reserve_s: float = 0.0  # training stops this long before the time limit

    def jobs(self) -> list[tuple[RunSpec, int]]:
        """Every (run, seed) in the order the study file gives them: seed-major, so that a study cut
        short has one seed of every recipe before it has three of the first."""
        depth = max(len(run.seeds) for run in self.runs)
        return [(run, run.seeds[k]) for k in range(depth) for run in self.runs if k < len(run.seeds)]

    def run(self, name: str) -> RunSpec:
        return next(run for run in self.runs if run.name == name)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _seeds(value: Any, where: str, problems: list[str]) -> tuple[int, ...]:
    if not isinstance(value, list) or not value or not all(_positive_int(s) for s in value):
        problems.append(f"{where}seeds must be a non-empty list of positive integers")
        return (1,)
    if len(set(value)) != len(value):
        problems.append(f"{where}seeds repeat a seed")
    return tuple(value)


def parse_study(data: Any, source: str = "study") -> StudySpec:
    problems: list[str] = []
    if not isinstance(data, dict):
        raise StudyError(["must be a JSON object"], source)
    for key in sorted(set(data) - _STUDY_KEYS):
        problems.append(f"unknown key {key!r} (known: {', '.join(sorted(_STUDY_KEYS))})")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        problems.append("name must be a non-empty string")
    out = data.get("out")
    if not isinstance(out, str) or not out:
        problems.append("out must be a directory path")
    parallel = data.get("parallel", 1)
    if not _positive_int(parallel):
        problems.append("parallel must be a positive integer")
    limit = data.get("time_limit_s")
    if limit is not None and (not isinstance(limit, (int, float)) or isinstance(limit, bool) or limit <= 0):
        problems.append("time_limit_s must be a positive number of seconds")
    device = data.get("device", "auto")
    if not isinstance(device, str):
        problems.append("device must be auto, cpu or cuda")
    mps = data.get("mps", False)
    if not isinstance(mps, bool):
        problems.append("mps must be true or false")
    reserve = data.get("score_reserve_s", 0)
    if not isinstance(reserve, (int, float)) or isinstance(reserve, bool) or reserve < 0:
        problems.append("score_reserve_s must be a number of seconds >= 0")
        reserve = 0
    elif isinstance(limit, (int, float)) and not isinstance(limit, bool) and limit > 0 and reserve >= limit:
        problems.append(f"score_reserve_s ({reserve}) must be less than time_limit_s ({limit})")
    common_set = data.get("set", {})
    if not isinstance(common_set, dict):
        problems.append("set must be an object of recipe keys")
        common_set = {}
    default_seeds = _seeds(data.get("seeds", [1]), "", problems)

    runs: list[RunSpec] = []
    raw_runs = data.get("runs")
    if not isinstance(raw_runs, list) or not raw_runs:
        problems.append("runs must be a non-empty list")
        raw_runs = []
    for i, raw in enumerate(raw_runs):
        where = f"runs[{i}]."
        if not isinstance(raw, dict):
            problems.append(f"runs[{i}] must be an object")
            continue
        for key in sorted(set(raw) - _RUN_KEYS):
            problems.append(f"{where}{key}: unknown key (known: {', '.join(sorted(_RUN_KEYS))})")
        run_name = raw.get("name")
        if not isinstance(run_name, str) or not run_name or "/" in run_name or run_name.startswith("."):
            problems.append(f"{where}name must be a plain directory name")
            run_name = f"run{i}"
        recipe = raw.get("recipe")
        if not isinstance(recipe, str) or not recipe:
            problems.append(f"{where}recipe must be a recipe path")
        elif not Path(recipe).is_file():
            problems.append(f"{where}recipe: {recipe} does not exist")
        command = raw.get("command", "train")
        if command not in COMMANDS:
            problems.append(f"{where}command must be one of {', '.join(COMMANDS)}")
        overrides = raw.get("set", {})
        args = raw.get("args", [])
        if not isinstance(overrides, dict):
            problems.append(f"{where}set must be an object of recipe keys")
            overrides = {}
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            problems.append(f"{where}args must be a list of strings")
            args = []
        model = raw.get("model", None if command == "train-symmetric" else "model")
        if not isinstance(model, str) or not model:
            problems.append(f"{where}model must name the model directory inside the run to score")
            model = "model"
        seeds = _seeds(raw["seeds"], where, problems) if "seeds" in raw else default_seeds
        init = raw.get("init")
        if init is not None and (not isinstance(init, str) or not init):
            problems.append(f"{where}init must name another run of the study")
            init = None
        elif init is not None and (command != "train" or "--init" in args):
            problems.append(f"{where}init starts a `train` run from another run's model; "
                            f"{'args give --init already' if '--init' in args else f'command is {command}'}")
        runs.append(RunSpec(run_name, Path(recipe) if isinstance(recipe, str) else Path(), seeds,
                            {**common_set, **overrides}, tuple(args), command, model, init))
    names = [r.name for r in runs]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"run name {dup!r} is used twice")
    problems += _init_problems(runs)

    evaluate = _parse_evaluate(data.get("evaluate", {}), names, problems)
    if problems:
        raise StudyError(problems, source)
    return StudySpec(name, Path(out), tuple(runs), evaluate, parallel,
                     float(limit) if limit is not None else None, device, mps, float(reserve))


def _init_problems(runs: list[RunSpec]) -> list[str]:
    """Each `init` names a run of the study that has the seeds of the run that starts from it, and
    no run starts, through a chain of inits, from itself."""
    problems: list[str] = []
    by_name = {run.name: run for run in runs}
    for run in runs:
        if run.init is None:
            continue
        source = by_name.get(run.init)
        if source is None:
            problems.append(f"run {run.name!r}: init {run.init!r} is not a run name ({', '.join(by_name)})")
            continue
        missing = [seed for seed in run.seeds if seed not in source.seeds]
        if missing:
            problems.append(f"run {run.name!r}: init run {run.init!r} has no seed {', '.join(map(str, missing))}")
        seen, current = {run.name}, source
        while True:
            if current.name in seen:
                problems.append(f"run {run.name!r}: its chain of init runs loops")
                break
            seen.add(current.name)
            if current.init is None or current.init not in by_name:
                break
            current = by_name[current.init]
    return problems


def _parse_evaluate(raw: Any, names: list[str], problems: list[str]) -> EvaluateSpec:
    if not isinstance(raw, dict):
        problems.append("evaluate must be an object")
        return EvaluateSpec()
    for key in sorted(set(raw) - _EVALUATE_KEYS):
        problems.append(f"evaluate.{key}: unknown key (known: {', '.join(sorted(_EVALUATE_KEYS))})")
    default = EvaluateSpec()
    splits = raw.get("splits", list(default.splits))
    if not isinstance(splits, list) or not splits or not all(isinstance(s, str) and s for s in splits):
        problems.append("evaluate.splits must be a non-empty list of split names")
        splits = list(default.splits)
    beam = raw.get("beam", default.beam)
    if not _positive_int(beam):
        problems.append("evaluate.beam must be a positive integer")
    batch_size = raw.get("batch_size", default.batch_size)
    if not _positive_int(batch_size):
        problems.append("evaluate.batch_size must be a positive integer")
    samples = raw.get("bootstrap_samples", default.bootstrap_samples)
    if not _positive_int(samples):
        problems.append("evaluate.bootstrap_samples must be a positive integer")
    limit = raw.get("limit")
    if limit is not None and not _positive_int(limit):
        problems.append("evaluate.limit must be a positive integer")
    baseline = raw.get("baseline")
    if baseline is not None and baseline not in names:
        problems.append(f"evaluate.baseline {baseline!r} is not a run name ({', '.join(names)})")
    data_dir = raw.get("data_dir", str(default.data_dir))
    if not isinstance(data_dir, str):
        problems.append("evaluate.data_dir must be a directory path")
        data_dir = str(default.data_dir)
    penalty = raw.get("length_penalty")
    if penalty is not None and (isinstance(penalty, bool) or not isinstance(penalty, (int, float)) or penalty < 0):
        problems.append("evaluate.length_penalty must be a number >= 0")
    form = raw.get("length_penalty_form")
    if form is not None and form not in FORMS:
        problems.append(f"evaluate.length_penalty_form must be one of {', '.join(FORMS)}, got {form!r}")
    alignment = raw.get("alignment", False)
    if not isinstance(alignment, bool):
        problems.append("evaluate.alignment must be true or false")
    return EvaluateSpec(tuple(splits), beam, baseline, Path(data_dir), samples, batch_size, limit, penalty, form,
                        alignment)


def load_study(path: str | Path) -> StudySpec:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StudyError(["no such file"], str(path)) from None
    except json.JSONDecodeError as error:
        raise StudyError([f"not valid JSON: {error.msg} (line {error.lineno})"], str(path)) from None
    return parse_study(data, str(path))


# A dry run of a study at toy size, on the CPU (`python -m training.study STUDY --tiny`): every
# code path of the real one (training, resume, init, scoring, alignment, the report) in minutes.
TINY_SET = {"max_updates": 4, "warmup": 2, "train_limit": 300, "valid_limit": 20, "val_bleu_sentences": 4,
            "val_interval": 4, "log_interval": 2, "checkpoint_interval": 2, "keep_last": 2, "average_last": 2,
            "spm_vocab_size": 400, "max_tokens": 1024, "export_fp16": False}
TINY_EVALUATE_LIMIT = 8


def tiny(spec: StudySpec) -> StudySpec:
    """The study at toy size in OUT-tiny, on the CPU, two jobs at a time; same runs, seeds and inits."""
    runs = tuple(replace(run, overrides={**run.overrides, **TINY_SET}) for run in spec.runs)
    evaluate = replace(spec.evaluate, limit=TINY_EVALUATE_LIMIT, bootstrap_samples=20)
    return replace(spec, out=spec.out.with_name(spec.out.name + "-tiny"), runs=runs, evaluate=evaluate,
                   device="cpu", mps=False, parallel=min(spec.parallel, 2))


def run_dir(spec: StudySpec, run: RunSpec, seed: int) -> Path:
    return spec.out / run.name / f"seed{seed}"


def is_trained(spec: StudySpec, run: RunSpec, seed: int) -> bool:
    return (run_dir(spec, run, seed) / run.model / "manifest.json").is_file()


def eval_file(directory: Path, split: str, suffix: str) -> Path:
    """Where a run's score (".json") or hypotheses (".hyp") on a split are kept: eval/SPLIT.json, a
    split written as a path flattened into one name (data/debian_catalogs/test:
    eval/data.debian_catalogs.test.json)."""
    return directory / "eval" / (split.strip("/").replace("/", ".") + suffix)


def has_checkpoints(directory: Path) -> bool:
    checkpoints = directory / "checkpoints"
    return checkpoints.is_dir() and any(p.suffix == ".pt" for p in checkpoints.iterdir())
