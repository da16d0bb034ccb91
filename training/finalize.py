"""Average the last checkpoints of a run and write servable model directories (one, or one per
direction for a symmetric run)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from model.model_dir import save_model_dir
from model.config import ModelConfig
from model.transformer import Transformer
from training import checkpoints as ckpt
from training.recipe import RecipeError, TrainingRecipe
from training.validation import validate

SYMMETRIC = "symmetric"
# The two models of a symmetric run, as its checkpoints name them (training.symmetric.DirectionPair).
PAIR_PARTS = ("s2t", "t2s")


def run_kind(run_dir: str | Path) -> str:
    """"directional" or "symmetric", read from the newest checkpoint of `run_dir`."""
    paths = _checkpoints(Path(run_dir))
    return ckpt.load_checkpoint(paths[-1]).get("extra", {}).get("kind", "directional")


def directions(recipe: TrainingRecipe) -> tuple[str, str]:
    """The names of the two directions of a symmetric recipe, e.g. ("en-de", "de-en")."""
    return f"{recipe.source_lang}-{recipe.target_lang}", f"{recipe.target_lang}-{recipe.source_lang}"


def _checkpoints(run_dir: Path) -> list[Path]:
    paths = ckpt.list_checkpoints(run_dir / "checkpoints")
    if not paths:
        raise RecipeError([f"no checkpoints in {run_dir / 'checkpoints'}"], "--run")
    return paths


def _averaged(run_dir: Path, last: int, recipe: TrainingRecipe | None
              ) -> tuple[list[Path], dict[str, Any], dict[str, torch.Tensor], TrainingRecipe, Path]:
    """The newest `last` checkpoints, the newest payload, their averaged parameters, the recipe, spm.model."""
    paths = _checkpoints(run_dir)
    if last < 1:
        raise RecipeError([f"--last must be >= 1, got {last}"], "--last")
    chosen = paths[-last:]
    newest = ckpt.load_checkpoint(chosen[-1])
    if recipe is None:
        recipe = TrainingRecipe.from_dict(newest["recipe"], str(chosen[-1]))
    spm_path = run_dir / "spm.model"
    if not spm_path.exists():
        raise RecipeError([f"{spm_path} is missing"], "--run")
    return chosen, newest, ckpt.average_checkpoints(chosen), recipe, spm_path


def _save(model: Transformer, out_dir: str | Path, spm_path: Path, *, source_lang: str, target_lang: str,
            recipe: TrainingRecipe, updates: int, info: dict[str, Any], fp16: bool, device: str, data: Any,
            extra_training: dict[str, Any] | None = None) -> tuple[Path, dict[str, Any]]:
    """Measure validation BLEU when `data` is given, then save one model directory."""
    model.to(device).eval()
    info = {**info, "weights_dtype": "float16" if fp16 else "float32"}
    if data is not None and data.bleu_src:
        amp = torch.device(device).type == "cuda" and recipe.amp == "bf16"
        result = validate(model, data, recipe, torch.device(device), amp)
        info.update(val_loss=result["loss"], val_bleu=result["bleu"], val_bleu_signature=result["bleu_signature"],
                    val_bleu_sentences=result["bleu_sentences"], val_beam=result["bleu_beam"])
    model.eval()
    extra = {"training": {"recipe": recipe.to_dict(), "updates": updates, **(extra_training or {}), **info}}
    out = save_model_dir(out_dir, model.cpu(), spm_path, source_lang=source_lang, target_lang=target_lang,
                         dtype=torch.float16 if fp16 else torch.float32, extra=extra)
    return Path(out), info


def average_and_save(run_dir: str | Path, last: int, out_dir: str | Path, *, fp16: bool = False,
                       device: str = "cpu", data: Any = None, recipe: TrainingRecipe | None = None
                       ) -> tuple[Path, dict[str, Any]]:
    """Average the parameters of the newest `last` checkpoints of `run_dir` and save them with
    `model.model_dir.save_model_dir` (fp16 weights when `fp16`). With `data` (the loop's `Data`), the
    averaged model's validation BLEU is measured first and written into the manifest."""
    run_dir = Path(run_dir)
    chosen, newest, averaged, recipe, spm_path = _averaged(run_dir, last, recipe)
    if newest.get("extra", {}).get("kind") == SYMMETRIC:
        raise RecipeError([f"{run_dir} is a symmetric run: save it with average_and_save_symmetric"], "--run")
    model = Transformer(ModelConfig.from_dict(newest["config"]))
    model.load_state_dict(averaged)
    info = {"averaged": [p.name for p in chosen], "steps": [ckpt.checkpoint_step(p) for p in chosen]}
    return _save(model, out_dir, spm_path, source_lang=recipe.source_lang, target_lang=recipe.target_lang,
                   recipe=recipe, updates=newest["step"], info=info, fp16=fp16, device=device, data=data)


def average_and_save_symmetric(run_dir: str | Path, last: int, out_root: str | Path, *, fp16: bool = False,
                                 device: str = "cpu", data: dict[str, Any] | None = None,
                                 recipe: TrainingRecipe | None = None
                                 ) -> tuple[dict[str, Path], dict[str, dict[str, Any]]]:
    """A symmetric run: average the newest `last` checkpoints and write one servable model directory a
    direction, `out_root/<src>-<tgt>` and `out_root/<tgt>-<src>`, each manifest naming its own
    languages. `data`: the loop's `Data` by direction name, for validation BLEU in the manifests."""
    run_dir = Path(run_dir)
    chosen, newest, averaged, recipe, spm_path = _averaged(run_dir, last, recipe)
    if newest.get("extra", {}).get("kind") != SYMMETRIC:
        raise RecipeError([f"{run_dir} is not a symmetric run: save it with average_and_save"], "--run")
    config = ModelConfig.from_dict(newest["config"])
    languages = ((recipe.source_lang, recipe.target_lang), (recipe.target_lang, recipe.source_lang))
    out_dirs: dict[str, Path] = {}
    infos: dict[str, dict[str, Any]] = {}
    for part, name, (source_lang, target_lang) in zip(PAIR_PARTS, directions(recipe), languages):
        prefix = part + "."
        model = Transformer(config)
        model.load_state_dict({key[len(prefix):]: t for key, t in averaged.items() if key.startswith(prefix)})
        info = {"averaged": [p.name for p in chosen], "steps": [ckpt.checkpoint_step(p) for p in chosen]}
        out_dirs[name], infos[name] = _save(
            model, Path(out_root) / name, spm_path, source_lang=source_lang, target_lang=target_lang, recipe=recipe,
            updates=newest["step"], info=info, fp16=fp16, device=device, data=(data or {}).get(name),
            extra_training={"direction": name, "symmetric": dict(recipe.symmetric or {})})
    return out_dirs, infos
