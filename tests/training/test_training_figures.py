"""A run's steady pace (training/study_report.py `training_figures`, read by benchmarks/study_throughput.py):
the median log interval but the first, in ms an update, from a training log written by hand."""
import json

from training.study_report import training_figures


def write_log(directory, intervals):
    """intervals: (step, seconds the interval trained); 1,000 tokens each."""
    lines = [json.dumps({"event": "start", "step": 0, "time": 0.0, "parameters": 10})]
    for step, seconds in intervals:
        lines.append(json.dumps({"event": "train", "step": step, "tokens": 1000, "tokens_per_s": 1000 / seconds,
                                 "time": float(step)}))
        lines.append(json.dumps({"event": "valid", "step": step, "time": float(step)}))
    (directory / "log.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_the_steady_pace_leaves_out_the_first_interval_where_compiling_happens(tmp_path):
    # 10 updates an interval: the first 60 s (compiling), then 0.5, 0.9 and 0.7 s: 50, 90 and 70 ms an update.
    write_log(tmp_path, [(10, 60.0), (20, 0.5), (30, 0.9), (40, 0.7)])
    figures = training_figures(tmp_path)
    assert figures["steady_ms_per_update"] == 70.0
    assert figures["ms_per_update"] == round(62.1 * 1000 / 40, 1)  # the mean counts the compiling
    # An interval of another length counts by its own updates: 25 updates in 1 s is 40 ms an update.
    write_log(tmp_path, [(10, 60.0), (35, 1.0)])
    assert training_figures(tmp_path)["steady_ms_per_update"] == 40.0


def test_a_run_with_one_interval_has_no_steady_pace(tmp_path):
    write_log(tmp_path, [(4, 12.0)])
    assert training_figures(tmp_path)["steady_ms_per_update"] is None
