"""Starting a run from a trained model (`train --init PATH`, `train-symmetric --init-forward/--init-backward`).

The run's model is built from the recipe, then every weight the initial model has is copied into it.
The recipe may ADD parts to the initial model's config — a supervised alignment head, a global
fertility head, structural alignment biases on a model that has none (its cross-attention weights then
live one level down, under the biased wrapper's `inner`, and are copied there) — and change what only shapes training (dropouts) or which layer's attention is read
(`alignment_layer`); every other config key must be equal, so that each copied weight means what it
meant. Weights the initial model lacks keep their fresh initialisation and are listed (the run log's
"init" event, and stderr); a weight the run's model lacks, or one of another shape, is an error,
except the weights of a head the recipe removes (REMOVABLE_HEADS: fine-tuning the translation of a
model whose alignment head is trained again afterwards, on the model it then is), which are left
out and listed.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from model.model_dir import MANIFEST_FILE, load_model_dir
from training import checkpoints as ckpt
from training.recipe import RecipeError

CHECKPOINT_DIR = "checkpoints"  # training.loop.CHECKPOINT_DIR (not imported: the loop imports this module)
# Config keys a fine-tuning recipe may set differently from its initial model.
CHANGEABLE_KEYS = frozenset({"supervised_alignment", "global_fertility", "alignment_layer",
                             "dropout", "attention_dropout", "activation_dropout", "alignment_biases"})
# Keys that may be added to an initial model that lacks them, but not changed once it has them.
ADD_ONLY_KEYS = frozenset({"alignment_biases"})
# Heads a recipe may leave out of an initial model that has them: config key -> their weights' prefix.
REMOVABLE_HEADS = {"supervised_alignment": "supervised_alignment.", "global_fertility": "global_fertility."}
# BiasedCrossAttention keeps the attention it wraps as `inner` (model/biases/biased_cross_attention.py).
CROSS_ATTENTION = ".cross_attention."
BIASED_INNER = ".cross_attention.inner."


@dataclass(frozen=True)
class InitialModel:
    """Pretrained weights for one direction, with where they came from."""

    path: Path
    state: dict[str, torch.Tensor]
    config: dict[str, Any]
    spm_path: Path
    source_lang: str
    target_lang: str


def read_initial_model(path: str | Path, flag: str) -> InitialModel:
    """A model directory (manifest.json), a training checkpoint (.pt) or a run directory (checkpoints/)."""
    path = Path(path)
    if path.is_dir() and (path / MANIFEST_FILE).is_file():
        loaded = load_model_dir(path)
        return InitialModel(path, loaded.model.state_dict(), loaded.config.to_dict(), path / "spm.model",
                            loaded.source_lang, loaded.target_lang)
    if path.is_dir() and ckpt.list_checkpoints(path / CHECKPOINT_DIR):
        path = ckpt.list_checkpoints(path / CHECKPOINT_DIR)[-1]
    elif not path.is_file():
        raise RecipeError([f"{path} is neither a model directory (manifest.json), a training checkpoint (.pt) "
                           f"nor a run directory (checkpoints/)"], flag)
    try:
        payload = ckpt.load_checkpoint(path)
    except (ValueError, RuntimeError) as error:
        raise RecipeError([f"{path}: {error}"], flag) from None
    if payload.get("extra", {}).get("kind", "directional") != "directional":
        raise RecipeError([f"{path} holds a symmetric pair, not one direction"], flag)
    recipe = payload["recipe"]
    return InitialModel(path, payload["model"], payload["config"], path.parent.parent / "spm.model",
                        recipe["source_lang"], recipe["target_lang"])


def check_initial_config(config: dict[str, Any], initial: InitialModel, flag: str,
                         changeable: frozenset[str] = CHANGEABLE_KEYS) -> None:
    """The recipe's model config against the initial model's: only `changeable` keys may differ."""
    differing = sorted(k for k in set(config) | set(initial.config)
                       if config.get(k) != initial.config.get(k)
                       and (k not in changeable or (k in ADD_ONLY_KEYS and initial.config.get(k))))
    if differing:
        raise RecipeError([f"{initial.path} has a different model config than the recipe gives (differs in "
                           f"{', '.join(differing)}; only {', '.join(sorted(changeable))} may change)"], flag)


def target_name(name: str, own: dict[str, torch.Tensor]) -> str:
    """The run model's name for an initial weight: a plain cross-attention's weight moves under the
    biased wrapper's `inner` when the recipe adds alignment biases."""
    if name not in own and CROSS_ATTENTION in name:
        wrapped = name.replace(CROSS_ATTENTION, BIASED_INNER, 1)
        if wrapped in own:
            return wrapped
    return name


def removed_heads(config: dict[str, Any], initial: InitialModel) -> list[str]:
    """The weight prefixes of the heads `initial` has and the recipe's model `config` leaves out."""
    return [prefix for key, prefix in REMOVABLE_HEADS.items()
            if initial.config.get(key) is not None and config.get(key) is None]


def load_initial_weights(model: nn.Module, initial: InitialModel, flag: str,
                         removed: Sequence[str] = ()) -> list[str]:
    """Copy every weight of `initial` into `model`, but those under a `removed` prefix
    (`removed_heads`); returns the names of the weights it did not have (left as initialised).
    Tied weights count once, under the name the state dict gives them."""
    own = model.state_dict()
    state = {target_name(name, own): tensor for name, tensor in initial.state.items()
             if not name.startswith(tuple(removed))}
    initial = replace(initial, state=state)
    unknown = sorted(set(initial.state) - set(own))
    if unknown:
        raise RecipeError([f"{initial.path} has weights the recipe's model lacks: {', '.join(unknown)}"], flag)
    shapes = [f"{name} {tuple(initial.state[name].shape)} vs {tuple(own[name].shape)}"
              for name in sorted(initial.state) if initial.state[name].shape != own[name].shape]
    if shapes:
        raise RecipeError([f"{initial.path} has weights of other shapes: {'; '.join(shapes)}"], flag)
    new = sorted(set(own) - set(initial.state))
    with torch.no_grad():
        for name, tensor in initial.state.items():
            own[name].copy_(tensor.to(dtype=own[name].dtype))
    return new
