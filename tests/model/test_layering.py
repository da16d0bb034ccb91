"""The folders of model/ in one direction: decoding and alignments sit on the network, never under it.

network   = model/*.py, model/attention/, model/biases/, model/phrase_representation/
decoding  = model/decoding/ (may use the network)
alignments, text = pure Python over words and links (no network, no decoding)
cpu_kernels = C kernels on tensors (model/cpu_kernels/), under decoding, knowing no model
"""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "model"
NETWORK_DIRS = ("attention", "biases", "phrase_representation")


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _layer(path: Path) -> str:
    parts = path.relative_to(MODEL).parts
    if len(parts) == 1 or parts[0] in NETWORK_DIRS:
        return "network"
    return parts[0]


FORBIDDEN = {
    "network": ("model.decoding", "model.alignments"),
    "decoding": ("model.alignments",),
    "alignments": ("model.decoding", "model.transformer", "model.attention", "model.biases", "model.layers",
                   "model.phrase_representation.functional", "torch"),
    "text": ("model.decoding", "model.alignments", "model.transformer", "model.attention", "torch"),
    "cpu_kernels": ("model.decoding", "model.alignments", "model.transformer", "model.attention", "model.biases",
                    "model.layers", "model.phrase_representation"),
}


def _offenders() -> dict[str, list[str]]:
    offenders: dict[str, list[str]] = {}
    for path in sorted(MODEL.rglob("*.py")):
        forbidden = FORBIDDEN[_layer(path)]
        bad = sorted(name for name in imported_modules(path)
                     if any(name == prefix or name.startswith(prefix + ".") for prefix in forbidden))
        if bad:
            offenders[str(path.relative_to(REPO))] = bad
    return offenders


def test_model_folders_import_in_one_direction():
    assert _offenders() == {}


def test_every_model_file_has_a_layer():
    layers = {_layer(path) for path in MODEL.rglob("*.py")}
    assert layers == set(FORBIDDEN)


def test_the_checker_sees_submodule_imports(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import torch.nn\nfrom model.decoding import generate\nfrom . import y\n")
    assert imported_modules(sample) == {"torch.nn", "model.decoding.generate"}
