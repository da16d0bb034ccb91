"""Recipes: the shipped ones load, unknown keys and bad values are rejected with readable messages."""
import json
from pathlib import Path

import pytest

from training.recipe import RecipeError, TrainingRecipe, load_recipe

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


def test_shipped_recipes_load():
    tiny = load_recipe(RECIPES / "transformer-tiny-en-de.json")
    assert (tiny.max_updates, tiny.lr, tiny.warmup, tiny.label_smoothing, tiny.clip_norm) == (8000, 0.005, 2000, 0.1, 1.0)
    assert tiny.betas == (0.9, 0.98) and tiny.average_last == 10 and tiny.max_tokens == 8192
    config = tiny.model_config(10000)
    assert (config.encoder_layers, config.decoder_layers, config.d_model, config.d_ff, config.n_heads,
            config.dropout) == (4, 4, 128, 256, 4, 0.3)
    assert (config.pad_id, config.bos_id, config.eos_id, config.vocab_size) == (0, 1, 2, 10000)
    smoke = load_recipe(RECIPES / "smoke.json")
    assert smoke.max_updates <= 100 and smoke.train_limit is not None


def test_unknown_keys_are_rejected_by_name(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"lr": 0.001, "warmpu": 10, "batch_size": 3}))
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    assert str(info.value) == f"{path}: unknown key(s): 'batch_size', 'warmpu'"


def test_every_bad_value_is_reported_at_once():
    with pytest.raises(RecipeError) as info:
        TrainingRecipe.from_dict({"lr": 0, "amp": "fp8", "keep_last": 2, "average_last": 5,
                                  "decode_length_penalty": -1, "decode_length_penalty_form": "mean",
                                  "model": {"d_model": 30, "n_heads": 4, "vocab_size": 9}})
    assert info.value.problems == [
        "decode_length_penalty must be a non-negative number, got -1",
        "decode_length_penalty_form must be one of power, gnmt, got 'mean'",
        "amp must be 'bf16' or 'off', got 'fp8'",
        "lr must be positive, got 0",
        "average_last (5) must not exceed keep_last (2)",
        "model: vocab_size is set from the SentencePiece model; remove it from the recipe",
    ]


def test_overrides(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"model": {"d_model": 64, "n_heads": 4}}))
    recipe = load_recipe(path, ["lr=0.01", "name=abc", "model.dropout=0.2", "betas=[0.9, 0.99]"])
    assert (recipe.lr, recipe.name, recipe.model, recipe.betas) == (0.01, "abc", {"d_model": 64, "n_heads": 4, "dropout": 0.2}, (0.9, 0.99))
    with pytest.raises(RecipeError, match=r"^--set: unknown key\(s\): 'nope'$"):
        load_recipe(path, ["nope=1"])
    with pytest.raises(RecipeError, match="must be KEY=VALUE"):
        load_recipe(path, ["lr"])
    assert TrainingRecipe.from_dict(recipe.to_dict()) == recipe
