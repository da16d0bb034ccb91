"""benchmarks/engines.py on a tiny model and a few sentences: the table's fields agree with each
other (throughput = sentences / seconds, latency only at batch 1, the speed reference at 1.0x,
float32 torch agreeing with itself, CTranslate2 float32 with our search), not its timings."""
from __future__ import annotations

import json

import pytest
from benchmarks.engines import main
from benchmarks.host import cpu_name
from tests.conftest import DATA
from tests.export.fixtures import model_dir

ENGINES = ["torch", "torch-kernels", "torch-static", "torch-int8", "ct2", "ct2-int8", "ct2@2"]


def test_table_fields_are_consistent(tmp_path, tmp_path_factory, tiny_spm):
    source = model_dir(tmp_path_factory, tiny_spm)
    results, rows_file = tmp_path / "engines.md", tmp_path / "rows.json"
    rows = main(["--model-dir", str(source), "--sizes", "bundled", "--engines", ",".join(ENGINES), "--data", str(DATA),
                 "--sentences", "6", "--beams", "1,2", "--batch-sizes", "1,4", "--work-dir", str(tmp_path / "work"),
                 "--results", str(results), "--json", str(rows_file), "--note", "tiny test model"])
    assert json.loads(rows_file.read_text()) == rows
    assert [(r["engine"], r["beam"], r["batch"]) for r in rows] == [
        (e, beam, batch) for e in ENGINES for beam in (1, 2) for batch in (1, 4)]
    speed = {(r["engine"], r["beam"], r["batch"]): r["sentences_per_s"] for r in rows}
    cpu_speed = {(r["engine"], r["beam"], r["batch"]): r["sentences_per_cpu_s"] for r in rows}
    for r in rows:
        assert r["sentences"] == 6 and r["size"] == "bundled"
        # ct2-int8 always runs one thread, NAME@N N threads, the others --threads (default 1)
        assert r["threads"] == (2 if r["engine"] == "ct2@2" else 1)
        assert r["sentences_per_s"] == pytest.approx(6 / r["seconds"], rel=1e-2)
        assert r["tokens_per_s"] == pytest.approx(r["tokens"] / r["seconds"], rel=1e-2, abs=0.1)
        assert r["ratio_to_ct2"] == pytest.approx(r["sentences_per_s"] / speed[("ct2-int8", r["beam"], r["batch"])], abs=1e-3)
        assert r["sentences_per_cpu_s"] == pytest.approx(6 / r["cpu_seconds"], rel=1e-2)
        assert r["cpu_ratio_to_ct2"] == pytest.approx(r["sentences_per_cpu_s"] / cpu_speed[("ct2-int8", r["beam"], r["batch"])], abs=1e-3)
        assert 0 < r["peak_mib"] < 2000  # the engine process's own peak, not its parent's
        if r["batch"] == 1:
            assert 0 < r["p50_ms"] <= r["p95_ms"]
        else:
            assert r["p50_ms"] is None and r["p95_ms"] is None
        assert 0.0 <= r["bleu"] <= 100.0 and r["peak_mib"] > 0
        assert 0.0 <= r["agreement"] <= 1.0
    by = {(r["engine"], r["beam"], r["batch"]): r for r in rows}
    for beam in (1, 2):
        for batch in (1, 4):
            assert by[("torch", beam, batch)]["agreement"] == 1.0
            # The kernels compute the eager step up to rounding: this model's searches do not move.
            assert by[("torch-kernels", beam, batch)]["agreement"] == 1.0
            assert by[("torch-static", beam, batch)]["agreement"] == 1.0  # the same search on static state
            assert by[("ct2-int8", beam, batch)]["ratio_to_ct2"] == by[("ct2-int8", beam, batch)]["cpu_ratio_to_ct2"] == 1.0
    for batch in (1, 4):
        # CTranslate2 float32 runs its own search and kernels; this tiny model was made so that the
        # two beam searches agree (tests/export/fixtures.py): the same top outputs at beam 2. (Greedy,
        # it runs to the length limit, where the two are not meant to agree: export/ct2_runner.py.)
        assert by[("ct2", 2, batch)]["agreement"] == 1.0
        assert by[("ct2", 2, batch)]["bleu"] == by[("torch", 2, batch)]["bleu"]
        assert by[("ct2@2", 2, batch)]["agreement"] == 1.0  # threads change the speed, not the output
    # Identical outputs (agreement 1.0) score the same BLEU as torch's.
    assert all(r["bleu"] == by[("torch", r["beam"], r["batch"])]["bleu"] for r in rows if r["agreement"] == 1.0)
    text = results.read_text()
    assert text.startswith("# All engines, one run (benchmarks/engines.py)\n\n## ")
    assert f": {cpu_name()}, " in text.splitlines()[2]
    assert ("| model | engine | threads | beam | batch | sent/s | tok/s | p50 ms (b1) | p95 ms (b1) | peak MiB | BLEU | "
            "agree w/ torch fp32 | × ct2-int8 | sent/CPU-s | × ct2-int8 by CPU time |") in text
    assert text.count("\n| bundled | ") == len(rows) and "tiny test model" in text


def test_unknown_engines_and_sizes_are_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--engines", "torch,tensorrt", "--results", "-"])
    assert exit_.value.code == 2
    assert ("unknown engine(s) tensorrt for cpu; known: torch, torch-kernels, torch-int8, torch-int8-kernels, torch-int8-layers, "
            "torch-static, torch-static-compiled, torchscript, onnx, onnx-int8, ct2, ct2-int8") in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--engines", "torch@0", "--results", "-"])
    assert "unknown engine(s) torch@0 for cpu" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--sizes", "large", "--results", "-"])
    assert "--sizes takes bundled, base, random, queryk-random; got 'large'" in capsys.readouterr().err
