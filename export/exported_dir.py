"""Exported directories: what every target writes besides its model files, and how it is checked.

An exported directory holds the target's files, spm.model and manifest.json. The manifest records
the sha256 of every other file, the ModelConfig, the language pair, the export options, the
library versions (and ONNX opset), the decoder state layout (graph targets) and the verification
result. Reading checks every hash, so a runtime never serves a changed file, and refuses an
export whose verification failed.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from model.model_dir import MANIFEST_FILE, TOKENIZER_FILE, read_checked_manifest, sha256_file
from model.config import ModelConfig
from model.errors import ArtifactError, ConfigError
from export.layout import StateLayout

FORMAT = "phrasal-export"
FORMAT_VERSION = 1
VERSIONED_PACKAGES = ("torch", "onnx", "onnxruntime", "onnxscript", "ctranslate2", "sentencepiece")


@dataclass(frozen=True)
class ExportedDir:
    """An exported model as a runtime needs it (built in memory by the exporter, or read from disk)."""

    path: Path
    target: str  # "onnx" | "torchscript" | "ct2"
    config: ModelConfig
    source_lang: str
    target_lang: str
    options: dict[str, Any]
    layout: StateLayout | None  # graph targets only
    manifest: dict[str, Any]

    @property
    def tokenizer_path(self) -> Path:
        return self.path / TOKENIZER_FILE

    @property
    def pair(self) -> str:
        return f"{self.source_lang}-{self.target_lang}"


def library_versions() -> dict[str, str]:
    versions = {}
    for name in VERSIONED_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def hash_files(path: Path) -> dict[str, str]:
    """sha256 of every file under `path` except the manifest, by relative POSIX path."""
    return {
        file.relative_to(path).as_posix(): sha256_file(file)
        for file in sorted(path.rglob("*"))
        if file.is_file() and file.name != MANIFEST_FILE
    }


def write_manifest(exported: ExportedDir, *, extra: dict[str, Any]) -> dict[str, Any]:
    """Hash every file now in the directory and write manifest.json; returns the manifest."""
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "target": exported.target,
        "source_lang": exported.source_lang,
        "target_lang": exported.target_lang,
        "model_config": exported.config.to_dict(),
        "options": exported.options,
        "state_layout": exported.layout.to_dict() if exported.layout is not None else None,
        "versions": library_versions(),
        **extra,
        "files": hash_files(exported.path),
    }
    (exported.path / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def read_export_dir(path: str | Path, target: str | None = None) -> ExportedDir:
    """Check and describe an exported directory; `target` (if given) must be the one it was made for."""
    path = Path(path)
    manifest = read_checked_manifest(
        path, format=FORMAT, format_version=FORMAT_VERSION,
        required_keys=("target", "source_lang", "target_lang", "model_config", "options"),
        required_files=(TOKENIZER_FILE,), what="exported model directory", hint=" (not an exported model directory)",
    )
    if target is not None and manifest["target"] != target:
        raise ArtifactError(f"{path} is a {manifest['target']} export, not {target}")
    verification = manifest.get("verification") or {}
    if verification.get("passed") is False:
        raise ArtifactError(f"{path}: this export failed its verification against eager PyTorch; re-export it")
    try:
        config = ModelConfig.from_dict(manifest["model_config"])
    except ConfigError as error:
        raise ArtifactError(f"{path / MANIFEST_FILE}: {error}") from None
    layout = manifest.get("state_layout")
    return ExportedDir(
        path=path,
        target=manifest["target"],
        config=config,
        source_lang=manifest["source_lang"],
        target_lang=manifest["target_lang"],
        options=dict(manifest["options"]),
        layout=StateLayout.from_dict(layout) if layout else None,
        manifest=manifest,
    )
