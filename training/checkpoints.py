"""Training checkpoints: save, resume, keep the last k, average parameters.

A checkpoint is a dict of tensors and plain Python values only (no pickled objects), so it loads
with `torch.load(weights_only=True)`: model, optimizer and scheduler state dicts, the update
count, the epoch and the batch position inside it, the RNG states, the model config and recipe.
"""
from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any, Sequence

import torch

FORMAT = "phrasal-train-checkpoint"
VERSION = 1
_NAME = re.compile(r"^checkpoint_(\d+)\.pt$")


def checkpoint_name(step: int) -> str:
    return f"checkpoint_{step:07d}.pt"


def rng_states() -> dict[str, Any]:
    states: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict[str, Any]) -> None:
    # A checkpoint loaded with map_location="cuda" brings the generator states along; they live on the CPU.
    torch.set_rng_state(states["torch"].cpu())
    random.setstate(_as_random_state(states["python"]))
    if "cuda" in states and torch.cuda.is_available():
        cuda = [state.cpu() for state in states["cuda"]]
        if len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda)


def _as_random_state(value: Any) -> tuple:
    # random.setstate wants tuples where a JSON-like round trip may have produced lists.
    version, internal, gauss = value
    return (version, tuple(internal), gauss)


def save_checkpoint(path: str | Path, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    scheduler: torch.optim.lr_scheduler.LRScheduler, step: int, epoch: int,
                    batch_in_epoch: int, config: dict[str, Any], recipe: dict[str, Any],
                    extra: dict[str, Any] | None = None) -> Path:
    """Write atomically (temp file, then rename): a crash mid-write never leaves a checkpoint to resume from."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "step": step,
        "epoch": epoch,
        "batch_in_epoch": batch_in_epoch,
        "rng": rng_states(),
        "config": config,
        "recipe": recipe,
        "extra": extra or {},
    }
    tmp = path.with_name(path.name + ".tmp")
    torch.save(payload, tmp)
    tmp.replace(path)
    return path


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    payload = torch.load(path, map_location=map_location, weights_only=True)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{path} is not a phrasal training checkpoint")
    if payload.get("version") != VERSION:
        raise ValueError(f"{path}: checkpoint version {payload.get('version')!r} is not supported")
    return payload


def list_checkpoints(directory: str | Path) -> list[Path]:
    """Numbered checkpoints in `directory`, oldest (fewest updates) first."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in directory.iterdir() if (m := _NAME.match(p.name))]
    return [p for _, p in sorted(found)]


def checkpoint_step(path: str | Path) -> int:
    match = _NAME.match(Path(path).name)
    if match is None:
        raise ValueError(f"not a numbered checkpoint: {path}")
    return int(match.group(1))


def prune_checkpoints(directory: str | Path, keep_last: int) -> list[Path]:
    """Delete all but the newest `keep_last` numbered checkpoints; returns what was deleted."""
    paths = list_checkpoints(directory)
    doomed = paths[: max(len(paths) - keep_last, 0)]
    for p in doomed:
        p.unlink()
    return doomed


def model_state(payload_or_path: dict[str, Any] | str | Path) -> dict[str, torch.Tensor]:
    payload = load_checkpoint(payload_or_path) if isinstance(payload_or_path, (str, Path)) else payload_or_path
    return payload["model"]


def average_checkpoints(paths: Sequence[str | Path]) -> dict[str, torch.Tensor]:
    """Elementwise mean of the model parameters of `paths` (accumulated in float64, returned in
    each tensor's own dtype). Integer buffers must agree and are taken from the last checkpoint."""
    if not paths:
        raise ValueError("no checkpoints to average")
    sums: dict[str, torch.Tensor] = {}
    last: dict[str, torch.Tensor] = {}
    keys: list[str] | None = None
    for path in paths:
        state = model_state(path)
        if keys is None:
            keys = list(state)
        elif set(state) != set(keys):
            raise ValueError(f"{path}: parameters differ from {paths[0]}")
        for name, tensor in state.items():
            if tensor.is_floating_point():
                acc = tensor.detach().to(torch.float64)
                sums[name] = acc if name not in sums else sums[name] + acc
            elif name in last and not torch.equal(last[name], tensor):
                raise ValueError(f"{path}: non-float tensor {name!r} differs between checkpoints")
            last[name] = tensor
    assert keys is not None
    return {name: (sums[name] / len(paths)).to(last[name].dtype) if name in sums else last[name] for name in keys}
