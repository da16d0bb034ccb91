"""benchmarks/decode_step_profile.py on the CPU at a tiny size (its numbers need a GPU): the search runs
under the profiler and the report has its row and the host's operators."""
import re

import pytest

from benchmarks import decode_step_profile


def test_a_cpu_run_reports_the_steps_and_the_operators(tmp_path):
    out = tmp_path / "profile.md"
    assert decode_step_profile.main(["--device", "cpu", "--sentences", "2", "--beam", "2", "--dtype", "float32",
                                     "--top", "3", "--out", str(out)]) == 0
    text = out.read_text()
    row = re.search(r"^\| ([\d.]+) \| ([\d.]+) \| – \| – \| – \|$", text, re.M)
    assert row and float(row.group(1)) > 0 and float(row.group(2)) >= 1  # every batch takes a step or more
    assert len(re.findall(r"^\| `aten::", text, re.M)) == 3


def test_a_missing_model_directory_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        decode_step_profile.main(["--device", "cpu", "--model-dir", str(tmp_path / "none")])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().endswith(f"--model-dir: no model directory {tmp_path / 'none'}")


def test_a_missing_split_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        decode_step_profile.main(["--device", "cpu", "--split", str(tmp_path / "none.gz")])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().endswith(f"--split: no file {tmp_path / 'none.gz'}")
