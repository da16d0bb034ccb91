"""An exported directory is served only as written: a changed file, a failed verification or the
wrong target is refused before anything loads, with a message naming the problem."""
from __future__ import annotations

import json
import shutil

import pytest

from model.errors import ArtifactError
from export.exported_dir import MANIFEST_FILE, read_export_dir
from export.runners import open_runner
from tests.export.fixtures import exported


@pytest.fixture
def export_copy(tmp_path, tmp_path_factory, tiny_spm):
    source = exported(tmp_path_factory, tiny_spm, "torchscript")
    return shutil.copytree(source, tmp_path / "copy")


def test_manifest_hashes_every_file_and_records_the_export(export_copy):
    manifest = json.loads((export_copy / MANIFEST_FILE).read_text())
    assert sorted(manifest["files"]) == ["decoder_step.pt", "encoder.pt", "spm.model"]
    assert (manifest["target"], manifest["source_lang"], manifest["target_lang"]) == ("torchscript", "en", "de")
    assert manifest["options"] == {"dtype": "float32", "device": "cpu"}
    assert manifest["verification"] == {"skipped": True}
    assert manifest["model_config"]["vocab_size"] == 500
    assert set(manifest["versions"]) >= {"torch", "sentencepiece"}
    layout = manifest["state_layout"]
    assert layout["shapes"]["layers.0.self.k"] == ["batch", 4, "past_len", 8]
    assert layout["shapes"]["layers.1.cross.v"] == ["batch", 4, "src_len", 8]
    assert layout["shapes"]["memory_pad_mask"] == ["batch", "src_len"]
    # Vanilla: the phrase table is the token attention as 1-grams, rebuilt by the runner.
    assert (layout["has_attention"], layout["phrase_attention"], layout["phrase_sizes"]) == (True, "token", 0)


def test_a_tampered_file_is_refused(export_copy):
    path = export_copy / "decoder_step.pt"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ArtifactError) as error:
        open_runner(export_copy)
    assert str(error.value) == f"{path}: sha256 does not match the manifest (file changed or corrupted)"


def test_a_missing_file_is_refused(export_copy):
    (export_copy / "spm.model").unlink()
    with pytest.raises(ArtifactError, match=r"missing spm.model$"):
        read_export_dir(export_copy)


def test_a_failed_verification_is_refused(export_copy):
    manifest = json.loads((export_copy / MANIFEST_FILE).read_text())
    manifest["verification"] = {"passed": False}
    (export_copy / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError) as error:
        read_export_dir(export_copy)
    assert str(error.value) == f"{export_copy}: this export failed its verification against eager PyTorch; re-export it"


def test_the_wrong_target_is_refused(export_copy):
    with pytest.raises(ArtifactError) as error:
        open_runner(export_copy, target="onnx")
    assert str(error.value) == f"{export_copy} is a torchscript export, not onnx"


def test_a_manifest_naming_a_file_outside_the_directory_is_refused(export_copy):
    manifest = json.loads((export_copy / MANIFEST_FILE).read_text())
    manifest["files"]["../escape.txt"] = "0" * 64
    (export_copy / MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError) as error:
        read_export_dir(export_copy)
    assert str(error.value) == f"{export_copy / MANIFEST_FILE}: lists '../escape.txt', which is not inside {export_copy}"


def test_a_model_directory_is_not_an_export(tmp_path):
    with pytest.raises(ArtifactError) as error:
        read_export_dir(tmp_path)
    assert str(error.value) == f"{tmp_path}: missing manifest.json (not an exported model directory)"
