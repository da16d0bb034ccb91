"""The study table, from what the run directories hold (log.jsonl, eval/*.json, eval/*.hyp).

Per run and seed: status, updates done, parameters, wall time (training sessions only, from the
log's first to last event of each session), tokens/s (target tokens over training time), and per
split BLEU cased detokenised (13a), BLEU lowercased (13a), chrF2 and placeholders kept (the share of
the source sentences with placeholders whose translation holds the same ones, training/evaluate.py;
"—" on a split without any). Per run: mean ± sample
standard deviation over the scored seeds, and the paired bootstrap p-value against the baseline
(sacreBLEU's paired bootstrap resampling on lowercased BLEU, each seed against the baseline's
run of the same seed, or its first scored seed; the largest p over seeds is reported, so
"p < 0.05" holds for every seed). With alignments scored (eval/alignment.json,
training.study_alignment): the gold AER of each system's own best alignment method and its AER
against eflomal's links in domain, mean ± standard deviation over seeds. Columns are data
(METRICS, ALIGNMENT): a new per-split metric or alignment figure is one entry there.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from training.data import read_lines, split_path
from training.study_spec import StudySpec, eval_file, has_checkpoints, is_trained, run_dir

METRICS = {"bleu": "BLEU", "bleu_lowercase": "BLEU lc", "chrf": "chrF2", "placeholders": "placeholders kept %"}
# Figures of eval/alignment.json shown per run (lower is better for both).
ALIGNMENT = {"gold_aer": "gold AER", "agreement_aer": "AER vs eflomal"}


def _read_log(directory: Path) -> list[dict[str, Any]]:
    path = directory / "log.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# What a run's log gives at each validation: BLEU (greedy, the recipe's val split) and the
# negative log-likelihood per target token (without label smoothing).
VALIDATION = {"bleu": ("BLEU", 2), "nll": ("NLL", 3)}


def training_figures(directory: Path) -> dict[str, Any]:
    """Updates done, parameters, wall time, target tokens trained and tokens/s from a run's log, and its validation figures
    by update: what compares runs a slot stopped at different update counts with runs that finished,
    and shows where a model starts to overfit."""
    events = _read_log(directory)
    starts = [i for i, e in enumerate(events) if e["event"] == "start"]
    wall = 0.0
    for k, begin in enumerate(starts):
        end = starts[k + 1] - 1 if k + 1 < len(starts) else len(events) - 1
        wall += events[end]["time"] - events[begin]["time"]
    train = [e for e in events if e["event"] == "train"]
    tokens = sum(e["tokens"] for e in train)
    seconds = sum(e["tokens"] / e["tokens_per_s"] for e in train if e["tokens_per_s"] > 0)
    timed = [e for e in train if e["tokens_per_s"] > 0]
    paces = [e["tokens"] / e["tokens_per_s"] * 1000 / (e["step"] - before["step"]) for before, e in zip(timed, timed[1:])]
    recipe_file = directory / "recipe.json"
    max_updates = json.loads(recipe_file.read_text())["max_updates"] if recipe_file.is_file() else None
    valid = [e for e in events if e["event"] == "valid"]
    return {
        "updates": train[-1]["step"] if train else 0,
        "max_updates": max_updates,
        "parameters": events[starts[-1]]["parameters"] if starts else None,
        "wall_s": round(wall, 1),
        "tokens": tokens,
        "tokens_per_s": round(tokens / seconds, 1) if seconds > 0 else None,
        # Training time only (validation and checkpoints left out): what sizes a GPU slot's part.
        "ms_per_update": round(seconds * 1000 / train[-1]["step"], 1) if train and seconds > 0 else None,
        # The median log interval's but the first: the pace once compiling, CUDA-graph recording and
        # allocator growth, which the first interval carries, are behind it (None: one interval only).
        "steady_ms_per_update": round(statistics.median(paces), 1) if paces else None,
        "validation": {key: {e["step"]: e[key] for e in valid if key in e} for key in VALIDATION},
    }


def scores(directory: Path, splits: tuple[str, ...]) -> dict[str, dict[str, float]]:
    found = {}
    for split in splits:
        path = eval_file(directory, split, ".json")
        if path.is_file():
            report = json.loads(path.read_text(encoding="utf-8"))
            # None: a split without placeholders, or a score written before the metric existed
            found[split] = {key: report.get(key, {}).get("score") for key in METRICS}
    return found


def alignment_figures(directory: Path) -> dict[str, Any]:
    path = directory / "eval" / "alignment.json"
    if not path.is_file():
        return {}
    report = json.loads(path.read_text(encoding="utf-8"))
    return {"method": report["method"], **{key: report.get(key) for key in ALIGNMENT}}


def mean_std(values: list[float | None], digits: int = 2) -> tuple[float, float | None] | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    mean = statistics.fmean(values)
    return round(mean, digits), (round(statistics.stdev(values), digits) if len(values) > 1 else None)


def paired_bootstrap_p(baseline: list[str], system: list[str], references: list[str], samples: int) -> float:
    """sacreBLEU's paired bootstrap resampling (lowercased BLEU), p of the system being no better."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    test = PairedTest([("baseline", baseline), ("system", system)], {"BLEU": BLEU(lowercase=True)},
                      [references], test_type="bs", n_samples=samples)
    _, results = test()
    return round(float(results["BLEU"][1].p_value), 4)


def collect(spec: StudySpec, statuses: dict[tuple[str, int], str]) -> dict[str, Any]:
    splits = spec.evaluate.splits
    rows = []
    for run, seed in spec.jobs():
        directory = run_dir(spec, run, seed)
        status = statuses.get((run.name, seed))
        figures = training_figures(directory)
        if status is None or status == "already trained":
            # A run a GPU slot cut short comes back as its log alone (its checkpoints stay on the device).
            status = "trained" if is_trained(spec, run, seed) else (
                "partial" if has_checkpoints(directory) else "stopped" if figures["updates"] else "not started")
        rows.append({"run": run.name, "seed": seed, "recipe": str(run.recipe), "status": status,
                     **figures, "scores": scores(directory, splits),
                     "alignment": alignment_figures(directory)})

    baseline_name = spec.evaluate.baseline
    references = {}
    for split in splits:
        for row in rows:
            if split in row["scores"] and split not in references:
                path = split_path(*spec.evaluate.locate(split), _target_lang(spec, row))
                references[split] = read_lines(path, spec.evaluate.limit)
    hyps = {(row["run"], row["seed"], split): read_lines(eval_file(run_dir(spec, _run(spec, row["run"]), row["seed"]),
                                                                   split, ".hyp"))
            for row in rows for split in row["scores"]}
    for row in rows:
        row["p_vs_baseline"] = {}
        if baseline_name is None or row["run"] == baseline_name:
            continue
        for split in row["scores"]:
            base_seeds = [r["seed"] for r in rows if r["run"] == baseline_name and split in r["scores"]]
            if not base_seeds:
                continue
            base_seed = row["seed"] if row["seed"] in base_seeds else base_seeds[0]
            row["p_vs_baseline"][split] = paired_bootstrap_p(
                hyps[(baseline_name, base_seed, split)], hyps[(row["run"], row["seed"], split)],
                references[split], spec.evaluate.bootstrap_samples)

    summary = []
    for run in spec.runs:
        mine = [r for r in rows if r["run"] == run.name]
        entry: dict[str, Any] = {"run": run.name, "recipe": str(run.recipe), "seeds": len(run.seeds),
                                 "trained": sum(r["status"] == "trained" for r in mine),
                                 "parameters": next((r["parameters"] for r in mine if r["parameters"]), None)}
        for split in splits:
            scored = [r for r in mine if split in r["scores"]]
            if not scored:
                continue
            entry[split] = {"seeds": len(scored), **{key: mean_std([r["scores"][split][key] for r in scored])
                                                    for key in METRICS}}
            ps = [r["p_vs_baseline"][split] for r in scored if split in r["p_vs_baseline"]]
            if ps:
                entry[split]["max_p_vs_baseline"] = max(ps)
        for key in ALIGNMENT:
            values = [r["alignment"][key] for r in mine if r["alignment"].get(key) is not None]
            if values:
                entry.setdefault("alignment", {})[key] = mean_std(values, 3)
        entry["validation"] = {}
        for key, (_, digits) in VALIDATION.items():
            found = [r["validation"][key] for r in mine]
            entry["validation"][key] = {
                step: (mean_std([f[step] for f in found if step in f], digits), sum(step in f for f in found))
                for step in sorted({step for f in found for step in f})}
        methods = sorted({r["alignment"]["method"] for r in mine if r["alignment"]})
        if methods:
            entry.setdefault("alignment", {})["methods"] = methods
        summary.append(entry)
    return {"study": spec.name, "splits": list(splits), "beam": spec.evaluate.beam, "baseline": baseline_name,
            "length_penalty": _length_penalty(spec), "summary": summary, "runs": rows}


def _length_penalty(spec: StudySpec) -> str:
    alpha, form = spec.evaluate.length_penalty, spec.evaluate.length_penalty_form
    if alpha is None and form is None:
        return "each recipe's own"
    return f"{form or 'the recipe form'} α={alpha if alpha is not None else 'the recipe α'} for every system"


def _run(spec: StudySpec, name: str):
    return next(r for r in spec.runs if r.name == name)


def _target_lang(spec: StudySpec, row: dict[str, Any]) -> str:
    manifest = run_dir(spec, _run(spec, row["run"]), row["seed"]) / _run(spec, row["run"]).model / "manifest.json"
    return json.loads(manifest.read_text(encoding="utf-8"))["target_lang"]


def _cell(value: tuple[float, float | None], digits: int = 2) -> str:
    mean, std = value
    return f"{mean:.{digits}f}" if std is None else f"{mean:.{digits}f} ± {std:.{digits}f}"


def render_markdown(report: dict[str, Any]) -> str:
    splits = report["splits"]
    # A study part without the baseline among its runs (studies/en-de-part2.json) leaves p to the
    # merged study's report.
    p_said = ("p = paired bootstrap (lowercased BLEU) against "
              f"the baseline `{report['baseline']}`, the largest over seeds (it says whether the difference is "
              "significant; the BLEU columns say which way)" if report["baseline"] is not None
              else "no baseline named, so no p (a study part: the merged study's report has it)")
    lines = [f"# Study {report['study']}", "",
             f"Beam {report['beam']}, length penalty {report.get('length_penalty', 'each recipe’s own')}; BLEU = sacreBLEU 13a (cased detokenised, and lowercased), chrF2; "
             f"mean ± standard deviation over scored seeds; {p_said}.", ""]
    header = ["run", "seeds scored / planned", "parameters"]
    for split in splits:
        header += [f"{split} {label}" for label in METRICS.values()] + [f"{split} p"]
    header += list(ALIGNMENT.values()) + ["alignment method"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for entry in report["summary"]:
        scored = max((entry[s]["seeds"] for s in splits if s in entry), default=0)
        cells = [entry["run"], f"{scored} / {entry['seeds']}", f"{entry['parameters']:,}" if entry["parameters"] else "—"]
        for split in splits:
            block = entry.get(split)
            cells += [_cell(tuple(block[key])) if block and block[key] is not None else "—" for key in METRICS]
            cells.append(f"{block['max_p_vs_baseline']:.4f}" if block and "max_p_vs_baseline" in block else "—")
        alignment = entry.get("alignment", {})
        cells += [_cell(tuple(alignment[key]), 3) if key in alignment else "—" for key in ALIGNMENT]
        cells.append(", ".join(alignment.get("methods", [])) or "—")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Runs", "", "| run | seed | status | updates | wall s | tokens/s | ms/update | "
              + " | ".join(f"{s} BLEU lc" for s in splits) + " |", "|" + "---|" * (7 + len(splits))]
    for row in report["runs"]:
        updates = f"{row['updates']}/{row['max_updates']}" if row["max_updates"] else str(row["updates"])
        cells = [row["run"], str(row["seed"]), row["status"], updates, f"{row['wall_s']:.0f}",
                 f"{row['tokens_per_s']:.0f}" if row["tokens_per_s"] else "—",
                 f"{row['ms_per_update']:.1f}" if row.get("ms_per_update") else "—"]
        cells += [f"{row['scores'][s]['bleu_lowercase']:.2f}" if s in row["scores"] else "—" for s in splits]
        lines.append("| " + " | ".join(cells) + " |")
    for key, (label, digits) in VALIDATION.items():
        lines += _validation_table(report["summary"], key, label, digits)
    return "\n".join(lines) + "\n"


def _validation_table(summary: list[dict[str, Any]], key: str, label: str, digits: int) -> list[str]:
    steps = sorted({step for entry in summary for step in entry.get("validation", {}).get(key, {})})
    if not steps:
        return []
    lines = ["", f"## Validation {label} by update", "",
             "From each run's log.jsonl (the recipes' val split; BLEU greedy): mean ± deviation over the seeds that "
             "reached the update (after a slash, how many, where fewer did than at the run's other updates); runs a "
             "slot stopped compare here with finished ones at equal updates.", "",
             "| run | " + " | ".join(str(step) for step in steps) + " |", "|" + "---|" * (1 + len(steps))]
    for entry in summary:
        found = entry.get("validation", {}).get(key, {})
        if not found:
            continue
        most = max(count for _, count in found.values())
        lines.append("| " + " | ".join([entry["run"]] + [
            "—" if step not in found else _cell(found[step][0], digits) + (f" /{found[step][1]}" if found[step][1] < most else "")
            for step in steps]) + " |")
    return lines


def write_report(spec: StudySpec, outcomes) -> Path:
    statuses = {(o.run, o.seed): o.status for o in outcomes}
    report = collect(spec, statuses)
    # Named after the study: the parts of one study and the whole share one output directory.
    (spec.out / f"{spec.name}.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    path = spec.out / f"{spec.name}.md"
    path.write_text(render_markdown(report), encoding="utf-8")
    return path
