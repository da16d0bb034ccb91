"""benchmarks/service_vs_ct2.py: each round's ratio is the service against the mean of the
CTranslate2 runs around it, and the report says so (the engines themselves: test_engines.py and
the load benchmark's tests)."""
from __future__ import annotations

import benchmarks.service_vs_ct2 as bench


def test_each_service_run_is_compared_with_the_ct2_runs_around_it(tmp_path, monkeypatch):
    ct2 = iter([100.0, 120.0, 110.0])
    service = iter([99.0, 115.0])
    monkeypatch.setattr(bench, "ct2_speed", lambda *args: next(ct2))
    monkeypatch.setattr(bench, "service_speed", lambda *args: next(service))
    out = tmp_path / "report.md"
    assert bench.main(["--rounds", "2", "--out", str(out)]) == 0
    text = out.read_text()
    assert "| 1 | 100.0 | 99.0 | 120.0 | 0.90 |" in text  # 99 / ((100 + 120) / 2)
    assert "| 2 | 120.0 | 115.0 | 110.0 | 1.00 |" in text  # 115 / 115
    assert "**Median 0.95× CTranslate2 int8** (range 0.90–1.00)." in text
    assert text.startswith("# The service against CTranslate2 int8 on the CPU")
