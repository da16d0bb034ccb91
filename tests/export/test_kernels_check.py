"""export/kernels_check.py and the torch backend's choice of step backend: float32 goes through the C
kernels only where the model directory's record says they were verified for its weights, int8
only on the decoder its own record was made on; phrasal models stay eager and say why."""
from __future__ import annotations

import json
import shutil

import pytest

from export.int8_check import main as int8_main
from export.kernels_check import RECORD_FILE, main
from service.runtime.base import DecodingOptions
from service.runtime.factory import RuntimeSpec, load_runtime
from tests.export.fixtures import model_dir

pytestmark = pytest.mark.usefixtures("one_thread")


def _copy(source, path):
    shutil.copytree(source, path)
    return path


def test_float32_runs_on_the_kernels_once_verified(tmp_path, tmp_path_factory, tiny_spm, caplog, capsys):
    path = _copy(model_dir(tmp_path_factory, tiny_spm), tmp_path / "en-de")
    spec = RuntimeSpec("torch", path, "cpu")
    with caplog.at_level("WARNING", logger="service.runtime.torch"):
        runtime = load_runtime(spec)
    assert (runtime.step_backend, runtime.kernels) == ("eager", None)
    assert (f"decoding {path} eagerly: {path / RECORD_FILE} not found (run python -m export.kernels_check {path})"
            in caplog.text)
    eager = runtime.translate(["Two dogs play in the snow.", "A man."], DecodingOptions(beam_size=3, n_best=2))

    assert main([str(path), "--sentences", "8", "--beam-size", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith(
        "float32 kernel path (kernels decoder) PASSED (kernels-float32: >= 99 % identical, BLEU drop <= 0.05): 8/8")
    record = json.loads((path / RECORD_FILE).read_text())
    assert (record["passed"], record["decoder"], record["precision"]) == (True, "kernels", "float32")
    runtime = load_runtime(spec)
    assert runtime.step_backend == "kernels"
    got = runtime.translate(["Two dogs play in the snow.", "A man."], DecodingOptions(beam_size=3, n_best=2))
    assert [[t.text for t in n] for n in got] == [[t.text for t in n] for n in eager]
    # Phrase maps need the eager step's phrase table: those searches run eagerly, and still answer.
    (phrased,) = runtime.translate(["Two dogs play in the snow."], DecodingOptions(beam_size=2, alignment="phrase"))
    assert phrased[0].phrase_map is not None
    assert load_runtime(RuntimeSpec("torch", path, "cpu", cpu_kernels="off")).step_backend == "eager"


def test_int8_is_served_only_on_the_decoder_its_record_names(tmp_path, tmp_path_factory, tiny_spm, caplog):
    path = _copy(model_dir(tmp_path_factory, tiny_spm), tmp_path / "en-de")
    assert int8_main([str(path), "--sentences", "8", "--beam-size", "2"]) == 0
    assert json.loads((path / "int8_verification.json").read_text())["decoder"] == "kernels"
    runtime = load_runtime(RuntimeSpec("torch", path, "cpu", cpu_quantization="int8"))
    assert (runtime.precision, runtime.step_backend) == ("int8", "kernels")
    with caplog.at_level("WARNING", logger="service.runtime.torch"):
        runtime = load_runtime(RuntimeSpec("torch", path, "cpu", cpu_quantization="int8", cpu_kernels="off"))
    assert (runtime.precision, runtime.step_backend) == ("float32", "eager")
    assert (f"int8 not verified for {path}, serving float32: {path / 'int8_verification.json'} verified the kernels "
            f"decoder, this process would run the eager one; rerun python -m export.int8_check {path}") in caplog.text


def test_a_model_the_kernels_cannot_decode_fails_the_check_and_is_decoded_eagerly(tmp_path, tmp_path_factory,
                                                                                   tiny_spm, capsys, caplog):
    path = _copy(model_dir(tmp_path_factory, tiny_spm, "convkv-heterogeneous-1-2-3"), tmp_path / "en-de")
    assert main([str(path), "--sentences", "4"]) == 1
    why = "the kernels cannot decode this model: decoder layer 0's self-attention is convkv; the kernels run vanilla attention only"
    assert capsys.readouterr().out.splitlines()[0] == f"float32 kernel path FAILED: {why}"
    assert json.loads((path / RECORD_FILE).read_text())["problems"] == [why]
    with caplog.at_level("WARNING", logger="service.runtime.torch"):
        assert load_runtime(RuntimeSpec("torch", path, "cpu")).step_backend == "eager"
    assert (f"decoding {path} eagerly: decoder layer 0's self-attention is convkv; the kernels run vanilla "
            "attention only") in caplog.text


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert main([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("export.kernels_check: error: ")
