"""Model directories: the only file I/O of the model package.

A model directory holds config.json, model.safetensors, spm.model and manifest.json, which
records the sha256 of each of the other three. Loading checks every hash and every tensor
shape against the config before a single weight is used, and never unpickles anything.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from model.config import ModelConfig
from model.errors import ArtifactError, ConfigError
from model.text.language_code import normalise_language_code
from model.text.tokenizer import Tokenizer
from model.transformer import Transformer

FORMAT = "phrasal-model"
FORMAT_VERSION = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "spm.model"
MANIFEST_FILE = "manifest.json"
HASHED_FILES = (CONFIG_FILE, WEIGHTS_FILE, TOKENIZER_FILE)


@dataclass(frozen=True)
class LoadedModel:
    model: Transformer
    config: ModelConfig
    tokenizer: Tokenizer
    manifest: dict[str, Any]
    path: Path

    @property
    def source_lang(self) -> str:
        return self.manifest["source_lang"]

    @property
    def target_lang(self) -> str:
        return self.manifest["target_lang"]


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def stored_state_dict(model: Transformer) -> dict[str, torch.Tensor]:
    """The parameters and persistent buffers, each stored once (tied embeddings share one name)."""
    seen: set[int] = set()
    tensors: dict[str, torch.Tensor] = {}
    for name, tensor in model.state_dict().items():
        key = tensor.data_ptr()
        if key in seen:
            continue
        seen.add(key)
        tensors[name] = tensor
    return tensors


def save_model_dir(
    path: str | Path,
    model: Transformer,
    tokenizer_path: str | Path,
    *,
    source_lang: str,
    target_lang: str,
    dtype: torch.dtype = torch.float32,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write a servable model directory; `extra` (e.g. training facts, BLEU) goes into the manifest."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / CONFIG_FILE).write_text(model.config.to_json() + "\n")
    tensors = {
        name: (t.detach().to(dtype) if t.is_floating_point() else t.detach()).cpu().contiguous()
        for name, t in stored_state_dict(model).items()
    }
    save_file(tensors, str(path / WEIGHTS_FILE), metadata={"format": "pt"})
    if Path(tokenizer_path).resolve() != (path / TOKENIZER_FILE).resolve():
        shutil.copyfile(tokenizer_path, path / TOKENIZER_FILE)
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "source_lang": source_lang,
        "target_lang": target_lang,
        "weights_dtype": str(dtype).removeprefix("torch."),
        "files": {name: sha256_file(path / name) for name in HASHED_FILES},
        **(extra or {}),
    }
    (path / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return path


def read_checked_manifest(
    path: str | Path,
    *,
    format: str,
    format_version: int,
    required_keys: tuple[str, ...],
    required_files: tuple[str, ...],
    what: str = "model directory",
    hint: str = "",
) -> dict[str, Any]:
    """A directory's manifest after checking its format and keys, that it records a hash for each
    of `required_files`, and that every file it lists exists with that sha256. Shared by model
    directories and exported directories (export/exported_dir.py); `hint` follows "missing manifest.json"."""
    path = Path(path)
    if not path.is_dir():
        raise ArtifactError(f"{what} {path} does not exist")
    try:
        manifest = json.loads((path / MANIFEST_FILE).read_text())
    except FileNotFoundError:
        raise ArtifactError(f"{path}: missing {MANIFEST_FILE}{hint}") from None
    except json.JSONDecodeError as error:
        raise ArtifactError(f"{path / MANIFEST_FILE}: not valid JSON ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != format or manifest.get("format_version") != format_version:
        raise ArtifactError(f"{path}: not a {format} v{format_version} directory")
    missing = [key for key in ("files", *required_keys) if key not in manifest]
    if missing:
        raise ArtifactError(f"{path / MANIFEST_FILE}: missing {', '.join(map(repr, missing))}")
    for key in ("source_lang", "target_lang"):
        if key in required_keys:
            try:
                manifest[key] = normalise_language_code(manifest[key])
            except ValueError as error:
                raise ArtifactError(f"{path / MANIFEST_FILE}: {key}: {error}") from None
    files = manifest["files"]
    for name in required_files:
        if name not in files:
            raise ArtifactError(f"{path / MANIFEST_FILE}: no hash recorded for {name}")
    root = path.resolve()
    for name, digest in sorted(files.items()):
        file = path / name
        if root not in file.resolve().parents:
            raise ArtifactError(f"{path / MANIFEST_FILE}: lists {name!r}, which is not inside {path}")
        if not file.is_file():
            raise ArtifactError(f"{path}: missing {name}")
        if sha256_file(file) != digest:
            raise ArtifactError(f"{file}: sha256 does not match the manifest (file changed or corrupted)")
    return manifest


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest after checking that every listed file exists and has the recorded hash."""
    return read_checked_manifest(path, format=FORMAT, format_version=FORMAT_VERSION,
                                 required_keys=("source_lang", "target_lang"), required_files=HASHED_FILES)


def load_model_dir(path: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> LoadedModel:
    """Verify and load a model directory into an eval-mode Transformer on `device`."""
    path = Path(path)
    manifest = read_manifest(path)
    try:
        config = ModelConfig.from_dict(json.loads((path / CONFIG_FILE).read_text()))
    except (json.JSONDecodeError, ConfigError) as error:
        raise ArtifactError(f"{path / CONFIG_FILE}: {error}") from None
    model = Transformer(config)
    expected = {name: tuple(t.shape) for name, t in stored_state_dict(model).items()}
    tensors: dict[str, torch.Tensor] = {}
    try:
        handle = safe_open(str(path / WEIGHTS_FILE), framework="pt")
    except Exception as error:  # safetensors' own error type names no file
        raise ArtifactError(f"{path / WEIGHTS_FILE}: not a readable safetensors file ({error})") from None
    with handle:
        stored = set(handle.keys())
        problems = [f"missing tensor {name}" for name in sorted(set(expected) - stored)]
        problems += [f"unexpected tensor {name}" for name in sorted(stored - set(expected))]
        for name in sorted(stored & set(expected)):
            shape = tuple(handle.get_slice(name).get_shape())
            if shape != expected[name]:
                problems.append(f"{name} has shape {shape}, config implies {expected[name]}")
            else:
                tensors[name] = handle.get_tensor(name)
    if problems:
        raise ArtifactError(f"{path / WEIGHTS_FILE} does not match {CONFIG_FILE}: " + "; ".join(problems))
    model.load_state_dict({n: t.float() if t.is_floating_point() else t for n, t in tensors.items()}, strict=False)
    model.to(device=device, dtype=dtype).eval()
    try:
        tokenizer = Tokenizer(path / TOKENIZER_FILE)
    except (RuntimeError, OSError) as error:
        raise ArtifactError(f"{path / TOKENIZER_FILE}: not a readable SentencePiece model ({error})") from None
    if tokenizer.vocab_size != config.vocab_size:
        raise ArtifactError(f"{path / TOKENIZER_FILE} has {tokenizer.vocab_size} pieces, config says {config.vocab_size}")
    return LoadedModel(model, config, tokenizer, manifest, path)
