"""The study throughput benchmark's steady pace (benchmarks/study_throughput.py): the median run
interval but the first, in ms an update, from a training log written by hand."""
import json
import math

from benchmarks import study_throughput


def write_log(path, intervals):
    """intervals: (step, seconds the interval trained); 1,000 tokens each."""
    lines = [json.dumps({"event": "start", "step": 0})]
    for step, seconds in intervals:
        lines.append(json.dumps({"event": "train", "step": step, "tokens": 1000, "tokens_per_s": 1000 / seconds}))
        lines.append(json.dumps({"event": "valid", "step": step}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_the_steady_pace_leaves_out_the_first_interval_where_compiling_happens(tmp_path):
    log = tmp_path / "log.jsonl"
    # 10 updates an interval: the first 60 s (compiling), then 0.5, 0.9 and 0.7 s: 50, 90 and 70 ms an update.
    write_log(log, [(10, 60.0), (20, 0.5), (30, 0.9), (40, 0.7)])
    assert math.isclose(study_throughput.steady_ms_per_update(log), 70.0)
    # An interval of another length counts by its own updates: 25 updates in 1 s is 40 ms an update.
    write_log(log, [(10, 60.0), (35, 1.0)])
    assert math.isclose(study_throughput.steady_ms_per_update(log), 40.0)


def test_a_run_with_one_interval_has_no_steady_pace(tmp_path):
    log = tmp_path / "log.jsonl"
    write_log(log, [(4, 12.0)])
    assert math.isnan(study_throughput.steady_ms_per_update(log))
