"""ONNX int8 exports (export/onnx_quantize.py): the graphs' projections become integer matmuls,
verification judges them by BLEU against eager float32 (export/verify.py), and only ONNX takes it."""
from __future__ import annotations

import json

import onnx
import pytest

from export.errors import ExportError
from export.onnx_target import ENCODER_FILE, STEP_FILE
from export.pipeline import ExportRequest, run_export
from export.runners import open_runner
from export.verify import BLEU_VS_EAGER
from tests.export.fixtures import model_dir

pytestmark = pytest.mark.usefixtures("one_thread")


def test_int8_graphs_are_quantised_and_verified_by_bleu(tmp_path, tmp_path_factory, tiny_spm):
    source = model_dir(tmp_path_factory, tiny_spm)
    out = tmp_path / "int8"
    manifest = run_export(ExportRequest("onnx", source, out, dtype="int8", verify_sentences=6, beam_size=2, min_bleu=0.0),
                          log=lambda _: None)
    verification = manifest["verification"]
    assert (verification["criterion"], verification["min_bleu"], verification["passed"]) == (BLEU_VS_EAGER, 0.0, True)
    assert verification["reference"] == "eager float32"
    assert manifest["options"]["dtype"] == "int8"
    assert manifest["build"]["quantization"] == "onnxruntime quantize_dynamic, QInt8 weights, per channel"
    for name in (ENCODER_FILE, STEP_FILE):
        ops = {node.op_type for node in onnx.load(str(out / name)).graph.node}
        assert "MatMulInteger" in ops and "DynamicQuantizeLinear" in ops, (name, sorted(ops))
    assert not list(out.glob("*.float32"))  # the float32 graphs were replaced, not kept beside
    runner = open_runner(out)
    assert runner.exported.options == {"dtype": "int8", "opset_requested": None}
    assert json.loads((out / "manifest.json").read_text())["verification"]["sentences"] == 6


def test_int8_is_for_onnx_only(tmp_path, tmp_path_factory, tiny_spm):
    source = model_dir(tmp_path_factory, tiny_spm)
    with pytest.raises(ExportError) as error:
        run_export(ExportRequest("torchscript", source, tmp_path / "ts", dtype="int8", verify=False), log=lambda _: None)
    assert str(error.value) == "dtype int8 is for onnx exports (ONNX Runtime quantisation), not torchscript"
    assert not (tmp_path / "ts").exists()  # nothing half-written left behind
