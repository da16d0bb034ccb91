"""benchmarks/request_path.py end to end at a tiny size: both depths answer every request (the app's
ASGI driver stops on any status but 200) and the table has a row per set and depth."""
import re

import pytest

from benchmarks import request_path


def test_requests_cycle_through_the_texts():
    assert request_path.requests_of(["a", "b", "c"], 3, 2) == [["a", "b"], ["c", "a"], ["b", "c"]]


@pytest.mark.parametrize("per", [1, 3])
def test_a_tiny_run_writes_a_row_per_set_and_depth(tmp_path, per):
    out = tmp_path / "request_path.md"
    assert request_path.main(["--requests", "3", "--rounds", "2", "--texts-per-request", str(per), "--out", str(out)]) == 0
    assert f"| texts | through | CPU µs a text, {per} a request (each round) |" in out.read_text()
    rows = [line for line in out.read_text().splitlines() if line.startswith("| ") and "µs" not in line]
    assert [tuple(cell.strip() for cell in row.strip("|").split("|")[:2]) for row in rows] == [
        (texts, depth) for texts in request_path.SETS for depth in ("the translator", "the app (ASGI)")]
    for row in rows:
        assert re.fullmatch(r"\d+, \d+", row.strip("|").split("|")[2].strip())
