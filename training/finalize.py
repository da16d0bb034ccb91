"""Average the last checkpoints of a run and write a servable model directory."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from model.artifacts import save_model_dir
from model.config import ModelConfig
from model.transformer import Transformer
from training import checkpoints as ckpt
from training.recipe import RecipeError, TrainingRecipe


def average_and_export(run_dir: str | Path, last: int, out_dir: str | Path, *, fp16: bool = False,
                       device: str = "cpu", data: Any = None, recipe: TrainingRecipe | None = None
                       ) -> tuple[Path, dict[str, Any]]:
    """Average the parameters of the newest `last` checkpoints of `run_dir` and save them with
    `model.artifacts.save_model_dir` (fp16 weights when `fp16`). With `data` (the loop's `Data`), the
    averaged model's validation BLEU is measured first and written into the manifest."""
    run_dir = Path(run_dir)
    paths = ckpt.list_checkpoints(run_dir / "checkpoints")
    if not paths:
        raise RecipeError([f"no checkpoints in {run_dir / 'checkpoints'}"], "--run")
    if last < 1:
        raise RecipeError([f"--last must be >= 1, got {last}"], "--last")
    chosen = paths[-last:]
    newest = ckpt.load_checkpoint(chosen[-1])
    config = ModelConfig.from_dict(newest["config"])
    if recipe is None:
        recipe = TrainingRecipe.from_dict(newest["recipe"], str(chosen[-1]))
    spm_path = run_dir / "spm.model"
    if not spm_path.exists():
        raise RecipeError([f"{spm_path} is missing"], "--run")

    model = Transformer(config)
    model.load_state_dict(ckpt.average_checkpoints(chosen))
    model.to(device).eval()
    info: dict[str, Any] = {
        "averaged": [p.name for p in chosen],
        "steps": [ckpt.checkpoint_step(p) for p in chosen],
        "weights_dtype": "float16" if fp16 else "float32",
    }
    if data is not None and data.bleu_src:
        from training.loop import validate

        amp = torch.device(device).type == "cuda" and recipe.amp == "bf16"
        result = validate(model, data, recipe, torch.device(device), amp)
        info.update(val_loss=result["loss"], val_bleu=result["bleu"], val_bleu_signature=result["bleu_signature"],
                    val_bleu_sentences=result["bleu_sentences"], val_beam=result["bleu_beam"])
    model.eval()
    extra = {"training": {"recipe": recipe.to_dict(), "updates": newest["step"], **info}}
    out = save_model_dir(out_dir, model.cpu(), spm_path, source_lang=recipe.source_lang,
                         target_lang=recipe.target_lang, dtype=torch.float16 if fp16 else torch.float32,
                         extra=extra)
    return Path(out), info
