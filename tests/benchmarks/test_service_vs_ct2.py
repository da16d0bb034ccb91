"""benchmarks/service_vs_ct2.py: each round's ratios are the service and our engine against the mean
of the CTranslate2 runs around them, and the report says so (the engines themselves: test_engines.py
and the load benchmark's tests)."""
from __future__ import annotations

import benchmarks.service_vs_ct2 as bench


def test_each_service_run_is_compared_with_the_ct2_runs_around_it(tmp_path, monkeypatch):
    ct2 = iter([100.0, 120.0, 110.0])
    service = iter([99.0, 115.0])
    ours = iter([121.0, 126.5])
    monkeypatch.setattr(bench, "ct2_speed", lambda *args: next(ct2))
    monkeypatch.setattr(bench, "service_speed", lambda *args: next(service))
    monkeypatch.setattr(bench, "ours_speed", lambda *args: next(ours))
    out = tmp_path / "report.md"
    assert bench.main(["--rounds", "2", "--out", str(out)]) == 0
    text = out.read_text()
    assert "| 1 | 100.0 | 99.0 | 121.0 | 120.0 | 0.90 | 1.10 |" in text  # 99 and 121 / ((100 + 120) / 2)
    assert "| 2 | 120.0 | 115.0 | 126.5 | 110.0 | 1.00 | 1.10 |" in text  # 115 and 126.5 / 115
    assert ("**Service: median 0.95× CTranslate2 int8** (range 0.90–1.00); our engine alone "
            "(torch-int8-kernels): median 1.10× (range 1.10–1.10).") in text
    assert text.startswith("# The service against CTranslate2 int8 on the CPU")


def test_each_engine_run_names_its_engine(monkeypatch):
    asked = []
    monkeypatch.setattr(bench, "engine_speed", lambda engine, *args: asked.append(engine) or 1.0)
    bench.ct2_speed("m", "w", 10)
    bench.ours_speed("m", "w", 10)
    bench.ours_speed("m", "w", 10, "none")
    assert asked == ["ct2-int8", "torch-int8-kernels", "torch-kernels"]


def test_the_engine_beside_the_service_is_the_one_it_decodes_with(tmp_path):
    from tests.bundled.expectations import MODEL_DIR

    assert bench.served_precision(str(MODEL_DIR), "auto") == "int8"  # its int8 record passed on the kernels
    assert bench.served_precision(str(MODEL_DIR), "none") == "none"
    unverified = tmp_path / "en-de"
    unverified.mkdir()
    for file in MODEL_DIR.iterdir():
        if file.name != "int8_verification.json":
            (unverified / file.name).write_bytes(file.read_bytes())
    assert bench.served_precision(str(unverified), "auto") == "none"  # the service serves it in float32
    assert bench.served_precision(str(unverified), "int8") == "none"
