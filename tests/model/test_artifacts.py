import json

import pytest
import torch

from model.model_dir import load_model_dir, save_model_dir, sha256_file
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


# -- the manifest is the whole truth about the directory ---------------------------------------
def rewrite_manifest(path, change) -> None:
    manifest = json.loads((path / "manifest.json").read_text())
    change(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "spm.model"])
def test_a_manifest_without_the_hash_of_a_file_is_refused(tmp_path, tiny_spm, name):
    _, path = save(tmp_path, tiny_spm)
    rewrite_manifest(path, lambda m: m["files"].pop(name))
    with pytest.raises(ArtifactError) as caught:
        load_model_dir(path)
    assert str(caught.value) == f"{path / 'manifest.json'}: no hash recorded for {name}"


def test_a_manifest_listing_an_extra_file_checks_it_too(tmp_path, tiny_spm):
    _, path = save(tmp_path, tiny_spm)
    (path / "notes.txt").write_text("trained on Multi30k\n")
    rewrite_manifest(path, lambda m: m["files"].update({"notes.txt": sha256_file(path / "notes.txt")}))
    assert load_model_dir(path).manifest["files"]["notes.txt"] == sha256_file(path / "notes.txt")
    (path / "notes.txt").write_text("trained on something else\n")
    with pytest.raises(ArtifactError) as caught:
        load_model_dir(path)
    assert str(caught.value) == f"{path / 'notes.txt'}: sha256 does not match the manifest (file changed or corrupted)"
    (path / "notes.txt").unlink()
    with pytest.raises(ArtifactError) as caught:
        load_model_dir(path)
    assert str(caught.value) == f"{path}: missing notes.txt"


def test_a_file_the_manifest_does_not_list_is_never_read(tmp_path, tiny_spm):
    # Only the listed files are loaded, so an unlisted one (a README, an editor's backup) is
    # neither checked nor used.
    model, path = save(tmp_path, tiny_spm)
    (path / "README.md").write_text("notes\n")
    loaded = load_model_dir(path)
    torch.testing.assert_close(loaded.model(SRC, TGT).logits, model(SRC, TGT).logits, atol=0, rtol=0)


def test_a_change_past_the_first_mebibyte_of_the_weights_is_refused(tmp_path, tiny_spm):
    # float32 weights of d_model 128: about 3 MB, so the hash must read past its first block.
    model = tiny_model(d_model=128, d_ff=256)
    path = save_model_dir(tmp_path / "big", model, tiny_spm, source_lang="en", target_lang="de")
    weights = path / "model.safetensors"
    data = bytearray(weights.read_bytes())
    assert len(data) > 2 * (1 << 20) + 1
    load_model_dir(path)  # intact: loads
    data[2 * (1 << 20) + 1] ^= 0x01  # one bit inside the third MiB
    weights.write_bytes(bytes(data))
    with pytest.raises(ArtifactError) as caught:
        load_model_dir(path)
    assert str(caught.value) == f"{weights}: sha256 does not match the manifest (file changed or corrupted)"


@pytest.mark.parametrize("size", [0, 1, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 * (1 << 20) + 7])
def test_sha256_file_is_the_sha256_of_the_whole_file(tmp_path, size):
    import hashlib

    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    (tmp_path / "f").write_bytes(data)
    assert sha256_file(tmp_path / "f") == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda m: m.update(format_version=2), "not a phrasal-model v1 directory"),
        (lambda m: m.update(format="phrasal-export"), "not a phrasal-model v1 directory"),
        (lambda m: m.pop("target_lang"), "missing 'target_lang'"),
        (lambda m: m.pop("files"), "missing 'files'"),
    ],
    ids=["version", "format", "no-target-lang", "no-files"],
)
def test_a_manifest_of_another_format_or_without_its_keys_is_refused(tmp_path, tiny_spm, change, problem):
    _, path = save(tmp_path, tiny_spm)
    rewrite_manifest(path, change)
    with pytest.raises(ArtifactError) as caught:
        load_model_dir(path)
    where = path if problem.startswith("not a") else path / "manifest.json"
    assert str(caught.value) == f"{where}: {problem}"


def test_a_manifest_that_is_not_an_object_is_refused(tmp_path, tiny_spm):
    _, path = save(tmp_path, tiny_spm)
    (path / "manifest.json").write_text("[1, 2]")
    with pytest.raises(ArtifactError) as caught:
        load_model_dir(path)
    assert str(caught.value) == f"{path}: not a phrasal-model v1 directory"


def test_a_manifest_naming_a_file_outside_the_directory_is_refused(tmp_path, tiny_spm):
    _, path = save(tmp_path, tiny_spm)
    (tmp_path / "escape.txt").write_text("x")
    rewrite_manifest(path, lambda m: m["files"].update({"../escape.txt": sha256_file(tmp_path / "escape.txt")}))
    with pytest.raises(ArtifactError) as caught:
        load_model_dir(path)
    assert str(caught.value) == f"{path / 'manifest.json'}: lists '../escape.txt', which is not inside {path}"


def test_saving_creates_parent_directories_and_can_rewrite_a_directory_in_place(tmp_path, tiny_spm):
    model = tiny_model()
    path = save_model_dir(tmp_path / "runs" / "a" / "m", model, tiny_spm, source_lang="en", target_lang="de")
    # Again, into the same directory, from the tokenizer already in it.
    save_model_dir(path, model, path / "spm.model", source_lang="en", target_lang="de", extra={"note": 1})
    loaded = load_model_dir(path)
    assert loaded.manifest["note"] == 1
    assert sha256_file(path / "spm.model") == sha256_file(tiny_spm)


def test_the_manifest_is_written_sorted_and_indented(tmp_path, tiny_spm):
    # Byte-stable manifests: the same model always gives the same file.
    _, path = save(tmp_path, tiny_spm, extra={"b": 1, "a": 2})
    text = (path / "manifest.json").read_text()
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
    assert (path / "config.json").read_text().endswith("}\n")


def test_weights_missing_a_tensor_or_holding_an_unknown_one_are_refused(tmp_path, tiny_spm):
    from safetensors.torch import load_file, save_file

    _, path = save(tmp_path, tiny_spm)
    tensors = load_file(path / "model.safetensors")
    tensors.pop("decoder_layers.1.ffn.up.weight")
    tensors["extra.weight"] = torch.zeros(2)
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    rewrite_manifest(path, lambda m: m["files"].update({"model.safetensors": sha256_file(path / "model.safetensors")}))
    with pytest.raises(ArtifactError) as caught:
        load_model_dir(path)
    assert str(caught.value) == (
        f"{path / 'model.safetensors'} does not match config.json: "
        "missing tensor decoder_layers.1.ffn.up.weight; unexpected tensor extra.weight"
    )


def test_a_tokenizer_of_another_vocabulary_size_is_refused(tmp_path, tiny_spm):
    model = tiny_model(vocab_size=600)
    path = save_model_dir(tmp_path / "m", model, tiny_spm, source_lang="en", target_lang="de")
    with pytest.raises(ArtifactError) as caught:
        load_model_dir(path)
    assert str(caught.value) == f"{path / 'spm.model'} has 500 pieces, config says 600"
