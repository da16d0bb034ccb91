"""Scoring the runs a slot's time limit stopped (training/study_partial.py): which jobs, how many
checkpoints are averaged, the commands, and the table's arithmetic, with the child processes faked."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

from training import study_partial
from training.study_spec import parse_study

REPO = Path(__file__).resolve().parents[2]
SMOKE = str(REPO / "recipes" / "smoke.json")


def spec_for(tmp_path):
    return parse_study({"name": "p", "out": str(tmp_path / "out"), "parallel": 2, "seeds": [1, 2],
                        "evaluate": {"splits": ["test_2016_flickr", "test_2017_flickr"], "baseline": "base",
                                     "length_penalty": 0.6, "length_penalty_form": "gnmt"},
                        "runs": [{"name": "base", "recipe": SMOKE}, {"name": "other", "recipe": SMOKE, "seeds": [7]},
                                 {"name": "done", "recipe": SMOKE, "seeds": [1]}]}, "study.json")


def stopped_run(directory: Path, steps: list[int], average_last: int) -> None:
    (directory / "checkpoints").mkdir(parents=True)
    for step in steps:
        (directory / "checkpoints" / f"checkpoint_{step}.pt").write_bytes(b"")
    (directory / "recipe.json").write_text(json.dumps({"average_last": average_last}))


def test_stopped_runs_are_averaged_over_what_they_have_and_scored_on_the_first_split(tmp_path, monkeypatch):
    spec = spec_for(tmp_path)
    out = tmp_path / "out"
    stopped_run(out / "base" / "seed1", [3000, 3100, 3200], average_last=10)
    stopped_run(out / "base" / "seed2", [2900, 3000], average_last=1)
    (out / "other" / "seed7").mkdir(parents=True)  # never started: nothing to score
    stopped_run(out / "done" / "seed1", [8000], average_last=10)
    (out / "done" / "seed1" / "model").mkdir()
    (out / "done" / "seed1" / "model" / "manifest.json").write_text("{}")  # trained: the runner scores it
    bleu = {"seed1": 30.5, "seed2": 31.5}
    commands = []

    def fake_run(command, **kwargs):
        commands.append(command)
        if command[2] == "training.evaluate":
            seed = Path(command[command.index("--model-dir") + 1]).parts[-3]
            return subprocess.CompletedProcess(command, 0, stdout=json.dumps({"bleu": {"score": bleu[seed]}}), stderr="")
        return subprocess.CompletedProcess(command, 0, stdout="", stderr="")

    monkeypatch.setattr(study_partial.subprocess, "run", fake_run)
    assert [(run.name, seed) for run, seed in study_partial.stopped_jobs(spec)] == [("base", 1), ("base", 2)]
    table = study_partial.score_partial(spec)
    averages = sorted((c[c.index("--run") + 1], c[c.index("--last") + 1]) for c in commands if c[2] == "training")
    assert averages == [(str(out / "base" / "seed1"), "3"), (str(out / "base" / "seed2"), "1")]
    evaluations = [c for c in commands if c[2] == "training.evaluate"]
    assert {c[c.index("--split") + 1] for c in evaluations} == {"test_2016_flickr"}
    assert all(c[c.index("--length-penalty") + 1] == "0.6" and c[c.index("--beam") + 1] == "5" for c in evaluations)
    assert json.loads((out / "base" / "seed1" / "partial" / "eval" / "test_2016_flickr.json").read_text()) == \
        {"bleu": {"score": 30.5}}
    # 30.5 and 31.5: mean 31.00, sample standard deviation 0.71 (sqrt(0.5))
    assert "| base | 1, 2 | 3000–3200 | 31.00 ± 0.71 |" in table.read_text()
    assert table == out / "p-partial.md"


def test_a_failed_average_is_named_in_the_table_and_the_other_seeds_still_count(tmp_path, monkeypatch):
    spec = spec_for(tmp_path)
    out = tmp_path / "out"
    stopped_run(out / "base" / "seed1", [100], average_last=10)
    stopped_run(out / "base" / "seed2", [200], average_last=10)

    def fake_run(command, **kwargs):
        if command[2] == "training" and command[command.index("--run") + 1].endswith("seed2"):
            return subprocess.CompletedProcess(command, 2, stdout="", stderr="trace\nphrasal-train: broken checkpoint\n")
        if command[2] == "training.evaluate":
            return subprocess.CompletedProcess(command, 0, stdout=json.dumps({"bleu": {"score": 12.25}}), stderr="")
        return subprocess.CompletedProcess(command, 0, stdout="", stderr="")

    monkeypatch.setattr(study_partial.subprocess, "run", fake_run)
    text = study_partial.score_partial(spec).read_text()
    assert "| base | 1, 2 | 100–200 | 12.25 |" in text
    assert "- base seed 2: phrasal-train: broken checkpoint" in text


def test_nothing_stopped_writes_no_table_and_a_bad_study_is_exit_2(tmp_path, capsys):
    assert study_partial.score_partial(spec_for(tmp_path)) is None
    assert study_partial.main([str(tmp_path / "none.json")]) == 2
    assert capsys.readouterr().err.startswith("phrasal-study-partial: error:")
