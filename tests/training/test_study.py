"""The study runner: the study file's checks, the scheduler (parallel slots, resume, time limit,
failures) with a scripted launcher and clock, the table's arithmetic on constructed run
directories, and one real study end to end on the smoke recipe."""
from __future__ import annotations

import gzip
import json
import signal
import statistics
import subprocess
from pathlib import Path

import pytest

from training.study import main as study_main
from training import study as study_module
from training.study import evaluate_job, train_command, train_jobs
from training.study_report import collect, paired_bootstrap_p, render_markdown
from training.study_spec import StudyError, parse_study

REPO = Path(__file__).resolve().parents[2]
SMOKE = str(REPO / "recipes" / "smoke.json")


def spec_for(tmp_path, **changes):
    data = {"name": "s", "out": str(tmp_path / "out"), "parallel": 2, "seeds": [1, 2],
            "evaluate": {"splits": ["test_2016_flickr"], "baseline": "base"},
            "runs": [{"name": "base", "recipe": SMOKE}, {"name": "other", "recipe": SMOKE, "seeds": [7]}]}
    data.update(changes)
    return parse_study(data, "study.json")


def test_every_problem_of_a_study_file_is_reported_at_once(tmp_path):
    with pytest.raises(StudyError) as error:
        parse_study({"name": "", "out": "x", "parallel": 0, "colour": 1, "seeds": [1, 1], "mps": "yes",
                     "time_limit_s": 60, "score_reserve_s": 60,
                     "evaluate": {"baseline": "nope", "beam": 0, "length_penalty": -1, "length_penalty_form": "exp",
                                  "alignment": 1},
                     "runs": [{"name": "a", "recipe": str(tmp_path / "missing.json")},
                              {"name": "a", "recipe": SMOKE, "command": "fly"},
                              {"name": "b", "recipe": SMOKE, "command": "train-symmetric"}]}, "study.json")
    assert error.value.problems == [
        "unknown key 'colour' (known: device, evaluate, mps, name, out, parallel, runs, score_reserve_s, seeds, set, "
        "time_limit_s)",
        "name must be a non-empty string",
        "parallel must be a positive integer",
        "mps must be true or false",
        "score_reserve_s (60) must be less than time_limit_s (60)",
        "seeds repeat a seed",
        f"runs[0].recipe: {tmp_path / 'missing.json'} does not exist",
        "runs[1].command must be one of train, train-symmetric",
        "runs[2].model must name the model directory inside the run to score",
        "run name 'a' is used twice",
        "evaluate.beam must be a positive integer",
        "evaluate.baseline 'nope' is not a run name (a, a, b)",
        "evaluate.length_penalty must be a number >= 0",
        "evaluate.length_penalty_form must be one of power, gnmt, got 'exp'",
        "evaluate.alignment must be true or false",
    ]


def scoring_commands(spec, monkeypatch) -> list[list[str]]:
    seen = []

    def fake_run(command, **kwargs):
        seen.append(command)
        return subprocess.CompletedProcess(command, 0, stdout="{}", stderr="")

    monkeypatch.setattr(study_module.subprocess, "run", fake_run)
    for run in spec.runs:
        evaluate_job(spec, run, run.seeds[0], deadline=None)
    return seen


def test_scoring_decodes_every_run_with_the_studys_length_penalty_when_it_names_one(tmp_path, monkeypatch):
    fixed = spec_for(tmp_path, evaluate={"splits": ["test_2016_flickr"], "baseline": "base",
                                         "length_penalty": 0.6, "length_penalty_form": "gnmt"})
    commands = scoring_commands(fixed, monkeypatch)
    assert len(commands) == 2
    assert all(c[-4:] == ["--length-penalty", "0.6", "--length-penalty-form", "gnmt"] for c in commands)
    # Without one, each model decodes as its own recipe says (training/evaluate.py reads it).
    own = spec_for(tmp_path / "own")
    assert not any("--length-penalty" in c or "--length-penalty-form" in c for c in scoring_commands(own, monkeypatch))


def test_jobs_are_seed_major_so_a_short_study_has_one_seed_of_everything(tmp_path):
    spec = spec_for(tmp_path)
    assert [(run.name, seed) for run, seed in spec.jobs()] == [("base", 1), ("other", 7), ("base", 2)]


def test_train_command_sets_the_seed_and_overrides_and_resumes_a_run_with_checkpoints(tmp_path):
    spec = spec_for(tmp_path, set={"max_updates": 50}, device="cpu")
    run = spec.runs[0]
    command = train_command(spec, run, 2)
    out = tmp_path / "out" / "base" / "seed2"
    assert command[1:] == ["-m", "training", "train", "--recipe", SMOKE, "--out", str(out), "--device", "cpu",
                           "--quiet", "--set", "seed=2", "--set", "max_updates=50"]
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "checkpoint_0000010.pt").write_bytes(b"")
    assert train_command(spec, run, 2)[-1] == "--resume"


class ScriptedChild:
    """A child that finishes after `polls` polls with `code`, writing the model when it succeeds."""

    def __init__(self, polls, code, model_dir):
        self.polls, self.code, self.model_dir = polls, code, model_dir
        self.signals = []

    def poll(self):
        self.polls -= 1
        if self.polls > 0:
            return None
        if self.code == 0:
            self.model_dir.mkdir(parents=True, exist_ok=True)
            (self.model_dir / "manifest.json").write_text("{}")
        return self.code

    def send_signal(self, sig):
        self.signals.append(sig)

    def kill(self):
        self.signals.append(signal.SIGKILL)

    def wait(self, timeout=None):
        return -signal.SIGTERM


def test_the_scheduler_keeps_parallel_slots_full_and_reports_each_job(tmp_path):
    spec = spec_for(tmp_path)
    plan = {("base", "seed1"): (2, 0), ("other", "seed7"): (1, 3), ("base", "seed2"): (1, 0)}
    started, children = [], []

    def launch(command, log_path):
        out = Path(command[command.index("--out") + 1])
        started.append((out.parent.name, out.name, len([c for c in children if c.polls > 0])))
        polls, code = plan[(out.parent.name, out.name)]
        children.append(ScriptedChild(polls, code, out / "model"))
        return children[-1]

    outcomes = train_jobs(spec, deadline=None, launch=launch, sleep=lambda s: None)
    # Two slots: base/1 and other/7 start together; base/2 takes the slot other/7 frees.
    assert started == [("base", "seed1", 0), ("other", "seed7", 1), ("base", "seed2", 1)]
    assert [(o.run, o.seed, o.status) for o in outcomes] == [
        ("base", 1, "trained"), ("other", 7, "failed (exit 3)"), ("base", 2, "trained")]
    # A second invocation starts nothing that is trained; the failed job is tried again.
    started.clear()
    plan[("other", "seed7")] = (1, 0)
    outcomes = train_jobs(spec, deadline=None, launch=launch, sleep=lambda s: None)
    assert started == [("other", "seed7", 0)]
    assert [o.status for o in outcomes] == ["already trained", "trained", "already trained"]


def test_the_time_limit_stops_running_children_and_leaves_the_rest_unstarted(tmp_path):
    spec = spec_for(tmp_path, parallel=1)
    children = []

    def launch(command, log_path):
        children.append(ScriptedChild(10**6, 0, tmp_path / "never"))
        return children[-1]

    now = iter([0.0, 0.0, 5.0])
    outcomes = train_jobs(spec, deadline=5.0, launch=launch, clock=lambda: next(now), sleep=lambda s: None)
    assert len(children) == 1 and children[0].signals == [signal.SIGTERM]
    assert [o.status for o in outcomes] == ["stopped", "not started", "not started"]


def init_spec(tmp_path, **changes):
    """base (seeds 1, 2) and pre, which fine-tunes base's model of the same seed."""
    return spec_for(tmp_path, runs=[{"name": "base", "recipe": SMOKE}, {"name": "pre", "recipe": SMOKE, "init": "base"}],
                    **changes)


def test_init_problems_are_reported_at_once(tmp_path):
    with pytest.raises(StudyError) as error:
        parse_study({"name": "s", "out": "o", "seeds": [1],
                     "runs": [{"name": "a", "recipe": SMOKE, "init": "nope"},
                              {"name": "b", "recipe": SMOKE, "init": "a", "seeds": [2]},
                              {"name": "c", "recipe": SMOKE, "init": "d"}, {"name": "d", "recipe": SMOKE, "init": "c"},
                              {"name": "e", "recipe": SMOKE, "init": "a", "command": "train-symmetric", "model": "m"},
                              {"name": "f", "recipe": SMOKE, "init": "a", "args": ["--init", "x"]},
                              {"name": "g", "recipe": SMOKE, "init": 3}]}, "study.json")
    assert error.value.problems == [
        "runs[4].init starts a `train` run from another run's model; command is train-symmetric",
        "runs[5].init starts a `train` run from another run's model; args give --init already",
        "runs[6].init must name another run of the study",
        "run 'a': init 'nope' is not a run name (a, b, c, d, e, f, g)",
        "run 'b': init run 'a' has no seed 2",
        "run 'c': its chain of init runs loops",
        "run 'd': its chain of init runs loops",
    ]


def test_a_run_with_init_starts_from_the_named_runs_model_of_its_seed_unless_it_resumes(tmp_path):
    spec = init_spec(tmp_path, device="cpu")
    pre = spec.run("pre")
    out = tmp_path / "out" / "pre" / "seed2"
    assert train_command(spec, pre, 2)[-2:] == ["--init", str(tmp_path / "out" / "base" / "seed2" / "model")]
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "checkpoint_0000010.pt").write_bytes(b"")
    # train refuses --init with --resume: the checkpoints already hold the initialised run.
    command = train_command(spec, pre, 2)
    assert command[-1] == "--resume" and "--init" not in command


def test_a_job_with_init_waits_for_its_model_and_is_not_started_when_that_fails(tmp_path):
    spec = init_spec(tmp_path, parallel=3)
    plan = {("base", "seed1"): (3, 0), ("base", "seed2"): (1, 4), ("pre", "seed1"): (1, 0)}
    started, children = [], []

    def launch(command, log_path):
        out = Path(command[command.index("--out") + 1])
        started.append((out.parent.name, out.name))
        if out.parent.name == "pre":  # the model it starts from exists when it starts
            assert (Path(command[command.index("--init") + 1]) / "manifest.json").is_file()
        polls, code = plan[(out.parent.name, out.name)]
        children.append(ScriptedChild(polls, code, out / "model"))
        return children[-1]

    outcomes = train_jobs(spec, deadline=None, launch=launch, sleep=lambda s: None)
    # Three slots, but pre waits for base: base/1 and base/2 start; pre/1 once base/1 has its model.
    assert started == [("base", "seed1"), ("base", "seed2"), ("pre", "seed1")]
    assert [(o.run, o.seed, o.status) for o in outcomes] == [
        ("base", 1, "trained"), ("pre", 1, "trained"), ("base", 2, "failed (exit 4)"),
        ("pre", 2, "not started (init run base seed 2 has no model)")]


def write_run(out: Path, run: str, seed: int, *, bleu: float, hyps: list[str], params: int = 1000,
              updates: int = 20) -> None:
    """A run directory as training and scoring leave it."""
    d = out / run / f"seed{seed}"
    (d / "model").mkdir(parents=True)
    (d / "model" / "manifest.json").write_text(json.dumps({"target_lang": "de"}))
    (d / "recipe.json").write_text(json.dumps({"max_updates": updates}))
    events = [{"event": "start", "parameters": params, "time": 100.0},
              {"event": "train", "step": 10, "tokens": 1000, "tokens_per_s": 100.0, "time": 110.0},
              {"event": "start", "parameters": params, "time": 200.0},
              {"event": "train", "step": updates, "tokens": 3000, "tokens_per_s": 300.0, "time": 212.5}]
    (d / "log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (d / "eval").mkdir()
    scores = {"bleu": {"score": bleu}, "bleu_lowercase": {"score": bleu + 1}, "chrf": {"score": bleu + 20}}
    (d / "eval" / "test_2016_flickr.json").write_text(json.dumps(scores))
    (d / "eval" / "test_2016_flickr.hyp").write_text("".join(h + "\n" for h in hyps))


def test_the_table_means_deviations_and_bootstrap_p_from_run_directories(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    refs = ["ein hund läuft im park .", "zwei kinder spielen .", "eine frau liest ein buch ."] * 4
    with gzip.open(data / "test_2016_flickr.de.gz", "wt", encoding="utf-8") as handle:
        handle.write("".join(r + "\n" for r in refs))
    spec = spec_for(tmp_path, evaluate={"splits": ["test_2016_flickr"], "baseline": "base",
                                        "data_dir": str(data), "bootstrap_samples": 200})
    out = tmp_path / "out"
    worse = ["ein hund .", "kinder .", "eine frau ."] * 4
    write_run(out, "base", 1, bleu=30.0, hyps=worse)
    write_run(out, "base", 2, bleu=33.0, hyps=worse)
    write_run(out, "other", 7, bleu=40.0, hyps=refs, params=2000)
    report = collect(spec, {})
    base, other = report["summary"]
    assert base["test_2016_flickr"]["bleu"] == (31.5, round(statistics.stdev([30.0, 33.0]), 2)) == (31.5, 2.12)
    assert base["test_2016_flickr"]["bleu_lowercase"] == (32.5, 2.12)
    assert other["test_2016_flickr"]["chrf"] == (60.0, None)
    assert (base["trained"], base["seeds"], other["parameters"]) == (2, 2, 2000)
    rows = {(r["run"], r["seed"]): r for r in report["runs"]}
    # Two sessions: 10 s and 12.5 s of wall time; 4000 tokens over 10 + 10 s of training.
    assert (rows[("base", 1)]["wall_s"], rows[("base", 1)]["tokens_per_s"], rows[("base", 1)]["updates"]) == (22.5, 200.0, 20)
    assert rows[("base", 1)]["ms_per_update"] == 1000.0  # 20 s of training over 20 updates
    # Seed 7 has no baseline twin: it is compared with the baseline's first scored seed.
    expected_p = paired_bootstrap_p(worse, refs, refs, 200)
    assert rows[("other", 7)]["p_vs_baseline"] == {"test_2016_flickr": expected_p}
    assert expected_p < 0.05 and other["test_2016_flickr"]["max_p_vs_baseline"] == expected_p
    assert "p_vs_baseline" not in base["test_2016_flickr"] and "max_p_vs_baseline" not in base["test_2016_flickr"]
    markdown = render_markdown(report)
    # No placeholders column value: these scores hold none (a split without placeholders shows "—").
    assert f"| other | 1 / 1 | 2,000 | 40.00 | 41.00 | 60.00 | — | {expected_p:.4f} | — | — | — |" in markdown
    assert "| base | 2 / 2 | 1,000 | 31.50 ± 2.12 | 32.50 ± 2.12 | 51.50 ± 2.12 | — | — |" in markdown
    assert "p = paired bootstrap (lowercased BLEU) against the baseline `base`" in markdown
    # A study part that holds no baseline says so rather than naming one ("the baseline `None`").
    part = render_markdown({**report, "baseline": None})
    assert "no baseline named, so no p" in part and "`None`" not in part

    # Alignment figures, where scored: mean ± deviation of each over the seeds, the methods named.
    for seed, gold, agreement, method in ((1, 0.6, 0.3, "layer 0 shift, argmax"), (2, 0.5, None, "layer 2, argmax")):
        (out / "base" / f"seed{seed}" / "eval" / "alignment.json").write_text(json.dumps(
            {"method": method, "gold_aer": gold, "agreement_aer": agreement}))
    base = collect(spec, {})["summary"][0]
    assert base["alignment"] == {"gold_aer": (0.55, round(statistics.stdev([0.6, 0.5]), 3)), "agreement_aer": (0.3, None),
                                 "methods": ["layer 0 shift, argmax", "layer 2, argmax"]}
    assert ("| 0.550 ± 0.071 | 0.300 | layer 0 shift, argmax, layer 2, argmax |"
            in render_markdown(collect(spec, {})))


def test_a_run_without_its_model_is_reported_by_what_came_back(tmp_path):
    """A GPU slot that stopped a run returns its log but keeps its checkpoints: the report says
    "stopped" at its updates, not "not started"; with a checkpoint here it is "partial"."""
    spec = spec_for(tmp_path)
    out = tmp_path / "out"
    for seed in (1, 2):
        write_run(out, "base", seed, bleu=30.0, hyps=["x"], updates=8000)
        (out / "base" / f"seed{seed}" / "model" / "manifest.json").unlink()
        for scored in (out / "base" / f"seed{seed}" / "eval").iterdir():
            scored.unlink()
    (out / "base" / "seed2" / "checkpoints").mkdir()
    (out / "base" / "seed2" / "checkpoints" / "checkpoint_0008000.pt").write_bytes(b"")
    rows = {(r["run"], r["seed"]): (r["status"], r["updates"]) for r in collect(spec, {})["runs"]}
    assert rows == {("base", 1): ("stopped", 8000), ("base", 2): ("partial", 8000), ("other", 7): ("not started", 0)}

    # Validation figures by update, from the logs: seeds that stopped earlier leave later updates to the
    # others; an update where a seed logged no BLEU counts that seed out of the BLEU table only.
    for seed, found in ((1, {1000: (30.0, 1.6667), 2000: (35.0, 1.5)}), (2, {1000: (32.0, 1.8)})):
        with (out / "base" / f"seed{seed}" / "log.jsonl").open("a") as log:
            log.writelines(json.dumps({"event": "valid", "step": step, "bleu": bleu, "nll": nll, "time": 1.0}) + "\n"
                           for step, (bleu, nll) in found.items())
    with (out / "base" / "seed2" / "log.jsonl").open("a") as log:
        log.write(json.dumps({"event": "valid", "step": 3000, "nll": 1.4, "time": 2.0}) + "\n")
    markdown = render_markdown(collect(spec, {}))
    bleu, nll = markdown.split("## Validation BLEU by update")[1].split("## Validation NLL by update")
    assert "| run | 1000 | 2000 |" in bleu and "| base | 31.00 ± 1.41 | 35.00 /1 |" in bleu and "| other |" not in bleu
    assert "| run | 1000 | 2000 | 3000 |" in nll and "| base | 1.733 ± 0.094 | 1.500 /1 | 1.400 /1 |" in nll


@pytest.mark.usefixtures("one_thread")
def test_a_real_study_trains_scores_and_reports_and_a_rerun_redoes_nothing(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    for lang in ("en", "de"):
        with gzip.open(REPO / "data" / "multi30k" / f"test_2016_flickr.{lang}.gz", "rt", encoding="utf-8") as src:
            lines = [next(src) for _ in range(6)]
        with gzip.open(data / f"test_2016_flickr.{lang}.gz", "wt", encoding="utf-8") as dst:
            dst.writelines(lines)
    study = tmp_path / "study.json"
    study.write_text(json.dumps({
        "name": "smoke", "out": str(tmp_path / "out"), "device": "cpu", "seeds": [3],
        "set": {"max_updates": 4, "data_dir": str(REPO / "data" / "multi30k"), "train_limit": 100,
                "val_bleu_sentences": 0, "checkpoint_interval": 2, "average_last": 1},
        "evaluate": {"splits": ["test_2016_flickr"], "beam": 1, "data_dir": str(data)},
        "runs": [{"name": "base", "recipe": SMOKE}]}))
    assert study_main([str(study)]) == 0
    run = tmp_path / "out" / "base" / "seed3"
    saved = json.loads((run / "recipe.json").read_text())
    assert (saved["seed"], saved["max_updates"]) == (3, 4)
    scores = json.loads((run / "eval" / "test_2016_flickr.json").read_text())
    assert scores["sentences"] == 6 and scores["beam"] == 1
    assert len((run / "eval" / "test_2016_flickr.hyp").read_text().splitlines()) == 6
    report = json.loads((tmp_path / "out" / "smoke.json").read_text())
    assert report["runs"][0]["status"] == "trained" and report["runs"][0]["updates"] == 4
    assert report["summary"][0]["test_2016_flickr"]["bleu"] == [scores["bleu"]["score"], None]
    stamp = (run / "eval" / "test_2016_flickr.json").stat().st_mtime_ns
    assert study_main([str(study)]) == 0
    assert (run / "eval" / "test_2016_flickr.json").stat().st_mtime_ns == stamp
    assert json.loads((tmp_path / "out" / "smoke.json").read_text())["runs"][0]["status"] == "trained"


def test_a_bad_study_file_is_exit_2_and_one_line(tmp_path, capsys):
    study = tmp_path / "study.json"
    study.write_text("{not json")
    assert study_main([str(study)]) == 2
    err = capsys.readouterr().err
    assert err == f"phrasal-study: error: {study}: not valid JSON: Expecting property name enclosed in double quotes (line 1)\n"


def test_the_cli_is_reachable_as_a_module(tmp_path):
    done = subprocess.run([__import__("sys").executable, "-m", "training.study", str(tmp_path / "none.json")],
                          capture_output=True, text=True, cwd=REPO)
    assert (done.returncode, done.stderr) == (2, f"phrasal-study: error: {tmp_path / 'none.json'}: no such file\n")


def test_the_en_de_study_resolves_every_run_and_matches_the_baseline_to_the_phrasal_size():
    from model.transformer import Transformer
    from training.recipe import load_recipe
    from training.study_spec import load_study

    spec = load_study(REPO / "studies" / "en-de.json")
    sizes = {}
    for run in spec.runs:
        recipe = load_recipe(REPO / run.recipe, [f"{k}={json.dumps(v)}" for k, v in run.overrides.items()])
        config = recipe.model_config(10000)
        sizes[run.name] = sum(p.numel() for p in Transformer(config).parameters())
    assert sizes["baseline"] == 2_605_568
    assert abs(sizes["baseline-matched"] / sizes["queryk-heterogeneous-1-2-3"] - 1) < 0.01
    assert [run.name for run in spec.runs if len(run.seeds) == 3] == [
        "baseline", "baseline-matched", "queryk-heterogeneous-1-2-3", "queryk-interleaved"]
    # One decoding for every system in the main table (the papers' GNMT 0.6), alignments scored.
    assert (spec.evaluate.length_penalty, spec.evaluate.length_penalty_form, spec.evaluate.alignment) == (0.6, "gnmt", True)
    # Every fine-tuning run has a control: the same recipe and parent without the added term.
    finetunes = {run.name: run for run in spec.runs if run.init is not None}
    assert sorted(finetunes) == ["align-global-fertility-pre", "align-global-fertility-pre-control",
                                 "global-fertility-pre", "global-fertility-pre-control"]
    for name in ("global-fertility-pre", "align-global-fertility-pre"):
        run, control = finetunes[name], finetunes[f"{name}-control"]
        assert (control.recipe, control.init) == (run.recipe, run.init)
        assert control.overrides == {**run.overrides, "model.global_fertility": None, "name": control.overrides["name"]}
    assert finetunes["align-global-fertility-pre"].overrides["model.alignment_biases"] == spec.run("biases-all").overrides.get(
        "model.alignment_biases", load_recipe(REPO / spec.run("biases-all").recipe).model["alignment_biases"])


def test_the_study_parts_cover_every_job_of_the_study_once_and_fit_a_slot():
    """studies/en-de-partN.json: the runs of studies/en-de.json (same recipe, overrides, init), every
    job in exactly one part (parts 3 and 5 list the parents of their fine-tuning runs, trained in
    parts 1 and 4), each part with a time limit that leaves the device's 10-minute command room for
    the setup before it (18 s in part 2) and the pack after, at most 8 trainings side by side, and the
    same output directory, so that studies/en-de.json reports all parts."""
    from training.study_spec import load_study

    full = load_study(REPO / "studies" / "en-de.json")
    parents = {(3, "baseline"): 1, (5, "biases-all"): 4}
    owner: dict[tuple[str, int], int] = {}
    for number in range(1, 6):
        part = load_study(REPO / "studies" / f"en-de-part{number}.json")
        assert (part.out, part.evaluate.splits, part.evaluate.length_penalty) == (
            full.out, full.evaluate.splits, full.evaluate.length_penalty)
        assert part.time_limit_s + 45 <= 600 and part.score_reserve_s >= 60 and part.mps and part.parallel <= 8
        for run in part.runs:
            same = full.run(run.name)
            assert (run.recipe, run.overrides, run.init, run.command, run.model) == (
                same.recipe, same.overrides, same.init, same.command, same.model)
            assert set(run.seeds) <= set(same.seeds)
            for seed in run.seeds:
                if (number, run.name) in parents:
                    continue  # a parent, trained in an earlier part
                assert (run.name, seed) not in owner
                owner[(run.name, seed)] = number
    assert set(owner) == {(run.name, seed) for run, seed in full.jobs()}
    assert all(owner[(name, 1)] == number for (_, name), number in parents.items())
    # No stale part beside them: a file left from an earlier plan would train its jobs twice.
    assert sorted(p.name for p in (REPO / "studies").glob("en-de-part*.json")) == [f"en-de-part{n}.json" for n in range(1, 6)]


def test_the_mps_daemon_runs_for_a_shared_cuda_invocation_and_is_stopped_after(tmp_path):
    """A stand-in control program records its arguments, stdin and the pipe directory it was given;
    the daemon is started with -d, stopped with "quit" even when the invocation fails, and the
    environment is as before afterwards."""
    import os

    record = tmp_path / "calls"
    control = tmp_path / "mps-control"
    control.write_text(f"#!/bin/sh\nprintf '%s|%s|' \"$*\" \"$CUDA_MPS_PIPE_DIRECTORY\" >> {record}\n"
                       f"cat >> {record}\necho >> {record}\n")
    control.chmod(0o755)
    spec = spec_for(tmp_path, mps=True, device="cuda")
    before = os.environ.get("CUDA_MPS_PIPE_DIRECTORY")
    with pytest.raises(RuntimeError):
        with study_module.mps_daemon(spec, control=str(control)) as running:
            assert running is True
            pipe = os.environ["CUDA_MPS_PIPE_DIRECTORY"]
            raise RuntimeError("a failed invocation")
    lines = record.read_text().splitlines()
    assert lines == [f"-d|{pipe}|", f"|{pipe}|quit", ""]  # "quit" and its newline on stdin
    assert os.environ.get("CUDA_MPS_PIPE_DIRECTORY") == before and not Path(pipe).exists()
    for changes in ({"mps": False, "device": "cuda"}, {"mps": True, "device": "cpu"}, {"mps": True, "parallel": 1}):
        with study_module.mps_daemon(spec_for(tmp_path, **changes), control=str(control)) as running:
            assert running is False
    with study_module.mps_daemon(spec, control=str(tmp_path / "absent")) as running:
        assert running is False
    assert len(record.read_text().splitlines()) == 3  # nothing started or stopped since


def test_the_bundle_holds_the_light_files_and_the_parents_models(tmp_path):
    import tarfile

    from training.study_bundle import bundle

    spec = parse_study({"name": "s", "out": str(tmp_path / "out"), "seeds": [1],
                        "runs": [{"name": "base", "recipe": SMOKE}, {"name": "tuned", "recipe": SMOKE, "init": "base"},
                                 {"name": "other", "recipe": SMOKE}]}, "study.json")
    for name in ("base", "tuned", "other"):
        run = tmp_path / "out" / name / "seed1"
        for path in ("recipe.json", "log.jsonl", "train.out", "spm.model", "checkpoints/checkpoint_100.pt",
                     "model/manifest.json", "model/config.json", "model/model.safetensors", "model/spm.model",
                     "eval/test_2016_flickr.json", "eval/test_2016_flickr.hyp", "eval/alignment.json"):
            (run / path).parent.mkdir(parents=True, exist_ok=True)
            (run / path).write_text(path)
    (tmp_path / "out" / "s.md").write_text("table")
    written = bundle(spec, tmp_path / "back", "part9")
    assert [p.name for p in written] == ["part9-results.tar.gz", "part9-parents.tar.gz"]
    with tarfile.open(written[0]) as archive:
        results = sorted(archive.getnames())
    with tarfile.open(written[1]) as archive:
        parents = sorted(m.name for m in archive.getmembers() if m.isfile())
    out = str(tmp_path / "out").lstrip("/")
    light = ["eval/alignment.json", "eval/test_2016_flickr.hyp", "eval/test_2016_flickr.json", "log.jsonl",
             "model/config.json", "model/manifest.json", "recipe.json", "train.out"]
    assert results == sorted([f"{out}/s.md"] + [f"{out}/{name}/seed1/{path}" for name in ("base", "tuned", "other")
                                                 for path in light])
    assert parents == [f"{out}/base/seed1/model/{path}" for path in
                       ("config.json", "manifest.json", "model.safetensors", "spm.model")]


def test_a_job_started_again_from_scratch_sets_the_stopped_runs_log_aside(tmp_path):
    """A run stopped in an earlier slot comes back as its log without checkpoints: the next start
    trains from scratch and its log.jsonl must hold that run alone; a job with checkpoints resumes
    and keeps appending to its log."""
    from training.study import set_aside_stopped_log

    spec = spec_for(tmp_path, parallel=1, runs=[{"name": "base", "recipe": SMOKE, "seeds": [1, 2]}])
    fresh, resumed = tmp_path / "out" / "base" / "seed1", tmp_path / "out" / "base" / "seed2"
    for directory in (fresh, resumed):
        directory.mkdir(parents=True)
        (directory / "log.jsonl").write_text('{"event": "start"}\n')
    (fresh / "log.stopped-1.jsonl").write_text("older\n")
    (resumed / "checkpoints").mkdir()
    (resumed / "checkpoints" / "checkpoint_100.pt").write_bytes(b"")

    def launch(command, log_path):
        return ScriptedChild(0, 1, tmp_path / "never")

    train_jobs(spec, deadline=None, launch=launch, sleep=lambda s: None)
    assert sorted(p.name for p in fresh.iterdir()) == ["log.stopped-1.jsonl", "log.stopped-2.jsonl"]
    assert (fresh / "log.stopped-2.jsonl").read_text() == '{"event": "start"}\n'
    assert (resumed / "log.jsonl").is_file() and not (resumed / "log.stopped-1.jsonl").exists()
    assert set_aside_stopped_log(tmp_path / "nowhere") is None


def test_the_parts_models_come_back_one_archive_each_lowest_trained_seed_parents_left_out(tmp_path):
    from training.study_bundle import main as bundle_main, part_models

    full = {"name": "s", "out": str(tmp_path / "out"), "seeds": [1, 2],
            "runs": [{"name": "base", "recipe": SMOKE}, {"name": "tuned", "recipe": SMOKE, "init": "base"},
                     {"name": "other", "recipe": SMOKE}, {"name": "late", "recipe": SMOKE}]}
    (tmp_path / "s.json").write_text(json.dumps(full))
    (tmp_path / "part.json").write_text(json.dumps(full))
    trained = [("base", 1), ("tuned", 2), ("other", 1), ("other", 2), ("late", 2)]
    for name, seed in trained:
        model = tmp_path / "out" / name / f"seed{seed}" / "model"
        model.mkdir(parents=True)
        for file in ("manifest.json", "model.safetensors"):
            (model / file).write_text(file)
    spec = part = parse_study(full, "s.json")
    out = tmp_path / "out"
    # base: a parent (in the parents archive); tuned: its seed 2 (seed 1 untrained); late: cut by the cap
    assert part_models(spec, part, 2) == [("tuned", out / "tuned" / "seed2" / "model"),
                                          ("other", out / "other" / "seed1" / "model")]
    assert bundle_main([str(tmp_path / "s.json"), "--into", str(tmp_path / "back"), "--name", "p2",
                        "--models-of", str(tmp_path / "part.json"), "--models", "3"]) == 0
    assert sorted(p.name for p in (tmp_path / "back").iterdir()) == [
        "p2-model-late.tar.gz", "p2-model-other.tar.gz", "p2-model-tuned.tar.gz", "p2-parents.tar.gz", "p2-results.tar.gz"]
    # Packed again a minute later: a model archive is rewritten only when its model is newer.
    import os

    archive = tmp_path / "back" / "p2-model-other.tar.gz"
    os.utime(archive, (1_000_000, 1_000_000))
    os.utime(out / "other" / "seed1" / "model" / "manifest.json", (500_000, 500_000))
    again = [str(tmp_path / "s.json"), "--into", str(tmp_path / "back"), "--name", "p2",
             "--models-of", str(tmp_path / "part.json"), "--models", "3"]
    assert bundle_main(again) == 0 and archive.stat().st_mtime == 1_000_000
    os.utime(out / "other" / "seed1" / "model" / "manifest.json", (2_000_000, 2_000_000))
    assert bundle_main(again) == 0 and archive.stat().st_mtime > 2_000_000
