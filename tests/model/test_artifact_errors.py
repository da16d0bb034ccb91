"""A model directory that cannot be read fails with one line naming the file at fault, also
where the engine's own error names none (safetensors, SentencePiece)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from model.model_dir import MANIFEST_FILE, load_model_dir
from model.errors import ArtifactError

BUNDLED = Path(__file__).resolve().parents[2] / "models" / "en-de"


def tampered(tmp_path: Path, name: str, content: bytes) -> Path:
    """The bundled model with ``name`` replaced, its manifest hash updated to match."""
    model_dir = tmp_path / "m"
    shutil.copytree(BUNDLED, model_dir)
    (model_dir / name).write_bytes(content)
    manifest = json.loads((model_dir / MANIFEST_FILE).read_text())
    manifest["files"][name] = hashlib.sha256(content).hexdigest()
    (model_dir / MANIFEST_FILE).write_text(json.dumps(manifest))
    return model_dir


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("model.safetensors", b"", "model.safetensors: not a readable safetensors file (Error while deserializing header: header too small)"),
        ("model.safetensors", b"garbage" * 10, "model.safetensors: not a readable safetensors file (Error while deserializing header: header too large)"),
        ("spm.model", b"garbage", "spm.model: not a readable SentencePiece model (INTERNAL: could not parse ModelProto from {path})"),
    ],
)
def test_an_unreadable_file_is_named(tmp_path, name, content, message):
    model_dir = tampered(tmp_path, name, content)
    with pytest.raises(ArtifactError) as error:
        load_model_dir(model_dir)
    assert str(error.value) == f"{model_dir}/" + message.format(path=model_dir / name)
