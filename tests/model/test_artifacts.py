import json

import pytest
import torch

from model.artifacts import load_model_dir, save_model_dir, sha256_file
from model.errors import ArtifactError
from tests.helpers import tiny_model

SRC = torch.tensor([[5, 6, 7, 2]])
TGT = torch.tensor([[1, 8, 9]])


def save(tmp_path, tiny_spm, **kwargs):
    model = tiny_model()
    path = save_model_dir(tmp_path / "m", model, tiny_spm, source_lang="en", target_lang="de", **kwargs)
    return model, path


def test_round_trip_gives_the_same_outputs(tmp_path, tiny_spm):
    model, path = save(tmp_path, tiny_spm, extra={"bleu": 1.5})
    loaded = load_model_dir(path)
    assert loaded.config == model.config
    assert (loaded.source_lang, loaded.target_lang, loaded.manifest["bleu"]) == ("en", "de", 1.5)
    torch.testing.assert_close(loaded.model(SRC, TGT).logits, model(SRC, TGT).logits, atol=0, rtol=0)


def test_fp16_weights_round_trip_within_fp16_precision(tmp_path, tiny_spm):
    model, path = save(tmp_path, tiny_spm, dtype=torch.float16)
    loaded = load_model_dir(path)
    assert loaded.manifest["weights_dtype"] == "float16"
    assert next(loaded.model.parameters()).dtype == torch.float32
    torch.testing.assert_close(loaded.model(SRC, TGT).logits, model(SRC, TGT).logits, atol=2e-2, rtol=0)


def test_tampered_weights_are_refused(tmp_path, tiny_spm):
    _, path = save(tmp_path, tiny_spm)
    data = bytearray((path / "model.safetensors").read_bytes())
    data[-1] ^= 0xFF
    (path / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="model.safetensors: sha256 does not match the manifest"):
        load_model_dir(path)


def test_weights_that_do_not_fit_the_config_are_refused(tmp_path, tiny_spm):
    _, path = save(tmp_path, tiny_spm)
    config = json.loads((path / "config.json").read_text())
    config["d_ff"] = 128
    (path / "config.json").write_text(json.dumps(config))
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["files"]["config.json"] = sha256_file(path / "config.json")
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError) as caught:
        load_model_dir(path)
    assert "decoder_layers.0.ffn.up.weight has shape (64, 32), config implies (128, 32)" in str(caught.value)


def test_missing_file_and_missing_directory(tmp_path, tiny_spm):
    _, path = save(tmp_path, tiny_spm)
    (path / "spm.model").unlink()
    with pytest.raises(ArtifactError, match=r"missing spm.model"):
        load_model_dir(path)
    with pytest.raises(ArtifactError, match="does not exist"):
        load_model_dir(tmp_path / "nowhere")


def test_tied_embedding_is_stored_once(tmp_path, tiny_spm):
    from safetensors import safe_open

    _, path = save(tmp_path, tiny_spm)
    with safe_open(str(path / "model.safetensors"), framework="pt") as handle:
        names = set(handle.keys())
    assert "source_embedding.tokens.weight" in names
    assert "target_embedding.tokens.weight" not in names
