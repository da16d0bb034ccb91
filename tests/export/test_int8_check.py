"""export/int8_check.py: the int8 fast path's criterion on constructed results, the check on a
tiny model (a faithful runner passes, a broken one fails and says why), the record the service
reads (missing, failed, other weights, passed), and the torch backend's choice from it."""
from __future__ import annotations

import json

import pytest
import torch

from model.model_dir import load_model_dir
from model.quantization import INT8
from export.int8_check import (CRITERION, RECORD_FILE, EagerRunner, FastPathCriterion, check_int8, judge, main,
                               record_problem)
from export.verify import read_verify_set
from service.runtime.torch_runtime import cpu_model
from tests.conftest import DATA
from tests.export.fixtures import model_dir

pytestmark = pytest.mark.usefixtures("one_thread")


def _result(identical: int, sentences: int = 100, eager: float | None = 40.0, exported: float | None = 40.0) -> dict:
    references = None if eager is None else {"eager": eager, "exported": exported, "delta": exported - eager}
    return {"sentences": sentences, "identical_top": identical, "identical_rate": identical / sentences if sentences else 1.0,
            "bleu_vs_references": references}


def test_criterion_on_constructed_results():
    criterion = FastPathCriterion(min_identical=0.8, max_bleu_drop=0.3)
    assert judge(_result(80, eager=40.0, exported=39.7), criterion) == []  # both exactly at the bound
    assert judge(_result(100, eager=40.0, exported=41.5), criterion) == []  # better BLEU is no problem
    assert judge(_result(79), criterion) == ["identical top hypotheses 79.0 % < 80.0 %"]
    assert judge(_result(95, eager=40.0, exported=39.69), criterion) == [
        "BLEU against the references drops by 0.31 > 0.3 (40.00 -> 39.69)"]
    assert judge(_result(100, eager=None), criterion) == ["no reference translations, so the BLEU drop cannot be measured"]
    assert judge(_result(0, sentences=0), criterion) == ["no sentences were verified"]
    assert len(judge(_result(10, eager=40.0, exported=30.0), criterion)) == 2  # every problem at once


class _Broken:
    """A runner that drops the last piece of every hypothesis."""

    def __init__(self, model):
        self.eager = EagerRunner(model)

    def generate(self, sources, options):
        found = self.eager.generate(sources, options)
        for nbest in found:
            nbest[0].tokens = nbest[0].tokens[:-1]
        return found


def test_check_passes_a_faithful_runner_and_fails_a_broken_one(tmp_path_factory, tiny_spm):
    loaded = load_model_dir(model_dir(tmp_path_factory, tiny_spm))
    data = read_verify_set(DATA, "test_2016_flickr", "en", "de", 6)
    faithful = check_int8(loaded, data, runner=EagerRunner(loaded.model), beam_size=2)
    assert (faithful["passed"], faithful["problems"], faithful["precision"]) == (True, [], INT8)
    assert faithful["criterion"] == {"name": CRITERION, "min_identical": 0.75, "max_bleu_drop": 0.3}
    assert (faithful["result"]["identical_top"], faithful["result"]["sentences"]) == (6, 6)
    assert faithful["result"]["bleu_vs_references"]["delta"] == 0.0
    assert faithful["weights_sha256"] == loaded.manifest["files"]["model.safetensors"]
    broken = check_int8(loaded, data, runner=_Broken(loaded.model), beam_size=2)
    assert broken["passed"] is False
    assert broken["problems"][0] == "identical top hypotheses 0.0 % < 75.0 %"
    assert "passed" not in broken["result"]  # verify()'s own verdict is not the fast path's


def test_the_record_decides_what_the_torch_backend_serves(tmp_path, tmp_path_factory, tiny_spm, capsys):
    source = model_dir(tmp_path_factory, tiny_spm)
    path = tmp_path / "en-de"
    path.mkdir()
    for file in source.iterdir():
        (path / file.name).write_bytes(file.read_bytes())
    loaded = load_model_dir(path)
    cpu = torch.device("cpu")
    assert cpu_model(path, loaded, cpu, "none") == (None, "float32", None)
    model, precision, why = cpu_model(path, loaded, cpu, "int8")
    assert (model, precision) == (None, "float32")
    assert why == (f"int8 not verified for {path}, serving float32: {path / RECORD_FILE} not found "
                   f"(run python -m export.int8_check {path})")
    # A criterion it cannot meet (BLEU must rise by 1): failed, and float32 is served ...
    assert main([str(path), "--sentences", "8", "--beam-size", "2", "--max-bleu-drop", "-1"]) == 1
    record = json.loads((path / RECORD_FILE).read_text())
    assert record["passed"] is False
    # judged in batches and again one sentence at a time (the kernel backend's other code path)
    assert record["problems"] == ["BLEU against the references drops by 0.00 > -1 (0.00 -> 0.00)",
                                  "one sentence at a time: BLEU against the references drops by 0.00 > -1 (0.00 -> 0.00)"]
    assert record["one_at_a_time"]["identical_top"] == 8
    assert record_problem(path, loaded) == (f"{path / RECORD_FILE} says the int8 fast path failed verification: "
                                            "BLEU against the references drops by 0.00 > -1 (0.00 -> 0.00); "
                                            "one sentence at a time: BLEU against the references drops by 0.00 > -1 "
                                            "(0.00 -> 0.00)")
    assert cpu_model(path, loaded, cpu, "int8")[0] is None
    # ... the default criterion (this tiny model's int8 tops are its float32 ones): int8 is served.
    assert main([str(path), "--sentences", "8", "--beam-size", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[-2].startswith(
        "int8 fast path (kernels decoder) PASSED (int8-fast-path: >= 75 % identical, BLEU drop <= 0.3): "
        "8/8 identical top hypotheses")
    assert record_problem(path, loaded) is None
    model, precision, why = cpu_model(path, loaded, cpu, "int8")
    assert (precision, why) == ("int8", None)
    assert type(model.output_projection).__name__ == "Int8Linear" and model.output_projection.weight.dtype == torch.int8
    # A record made for other weights no longer applies.
    record = json.loads((path / RECORD_FILE).read_text())
    (path / RECORD_FILE).write_text(json.dumps({**record, "weights_sha256": "0" * 64}))
    assert record_problem(path, loaded) == f"{path / RECORD_FILE} was made for other weights; rerun python -m export.int8_check {path}"


def test_load_runtime_serves_int8_only_where_verified(tmp_path, tmp_path_factory, tiny_spm, caplog):
    from service.runtime.factory import RuntimeSpec, load_runtime
    from service.settings import Settings

    source = model_dir(tmp_path_factory, tiny_spm)
    path = tmp_path / "en-de"
    path.mkdir()
    for file in source.iterdir():
        (path / file.name).write_bytes(file.read_bytes())
    spec = RuntimeSpec("torch", path, "cpu", cpu_quantization="int8")  # what service/app.py makes of PHRASAL_CPU_QUANTIZATION
    auto = RuntimeSpec("torch", path, "cpu")
    with caplog.at_level("WARNING", logger="service.runtime.torch"):
        runtime = load_runtime(spec)
    assert runtime.precision == "float32" and runtime.model is not None
    assert f"int8 not verified for {path}, serving float32: {path / RECORD_FILE} not found" in caplog.text
    caplog.clear()
    with caplog.at_level("INFO", logger="service.runtime.torch"):
        runtime = load_runtime(auto)  # the default: float32 without a warning, the reason at info
    assert runtime.precision == "float32"
    assert [r.levelname for r in caplog.records if RECORD_FILE in r.getMessage()] == ["INFO"]
    assert main([str(path), "--sentences", "8", "--beam-size", "2"]) == 0
    runtime = load_runtime(spec)
    assert runtime.precision == "int8"
    assert runtime.model.output_projection.weight.dtype == torch.int8
    assert load_runtime(auto).precision == "int8"  # verified: the default serves int8
    assert load_runtime(RuntimeSpec("torch", path, "cpu", cpu_quantization="none")).precision == "float32"
    # Served like float32, word alignments and phrase maps included.
    from service.runtime.base import DecodingOptions

    (translation,) = runtime.translate(["Two dogs play in the snow."], DecodingOptions(beam_size=2, n_best=2, alignment="phrase"))
    assert len(translation) == 2 and all(t.alignment is not None and t.phrase_map is not None for t in translation)
    assert Settings().cpu_quantization == "auto"
    with pytest.raises(ValueError) as error:
        Settings(backend="onnx", export_dirs=[path], cpu_quantization="int8")
    assert ("cpu_quantization=int8 applies to backend torch; an onnx export is quantised when it is made "
            "(python -m export onnx MODEL_DIR OUT --dtype int8)") in str(error.value)
    assert Settings(backend="onnx", export_dirs=[path]).backend == "onnx"  # "auto" asks nothing of an export
    from service.app import load_default_runtimes

    (model,) = load_default_runtimes(Settings(model_dirs=[path], device="cpu", cpu_quantization="int8", inference_process=False))
    assert model.runtime.precision == "int8"  # the setting reaches the runtime
    (model,) = load_default_runtimes(Settings(model_dirs=[path], device="cpu", cpu_quantization="none", inference_process=False))
    assert model.runtime.precision == "float32"


def test_auto_is_float16_on_cuda_without_a_word():
    from service.runtime.torch_runtime import cpu_model

    assert cpu_model("unused", None, torch.device("cuda"), "auto") == (None, "float16", None)
    assert cpu_model("unused", None, torch.device("cuda"), "none") == (None, "float16", None)
    assert cpu_model("unused", None, torch.device("cuda"), "int8") == (
        None, "float16", "cpu_quantization=int8 applies to the CPU only; serving float16 on cuda")
