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


def test_train_mix_entries_are_checked_and_their_pairs_follow_the_main_split_copies_times(tmp_path):
    import gzip

    from training.loop import RunLog, prepare_data

    with pytest.raises(RecipeError) as info:
        TrainingRecipe.from_dict({"train_mix": [{"data_dir": "d", "split": "", "copies": 0}, {"data_dir": "d"}]})
    assert info.value.problems == [
        "train_mix[0].split must be a non-empty string, got ''",
        "train_mix[0].copies must be a positive integer, got 0",
        "train_mix[1] must be an object with exactly the keys data_dir, split, copies, got {'data_dir': 'd'}",
    ]
    main, extra = tmp_path / "main", tmp_path / "extra"
    for directory, split, lines in ((main, "train", ["a b", "c d", "e f"]), (main, "val", ["a b"]),
                                    (extra, "train", ["g h", "i j"])):
        directory.mkdir(exist_ok=True)
        for lang in ("en", "de"):
            (directory / f"{split}.{lang}.gz").write_bytes(gzip.compress("".join(f"{line} {lang}\n" for line in lines)
                                                                         .encode()))
    recipe = TrainingRecipe.from_dict({"data_dir": str(main), "spm_vocab_size": 20, "val_bleu_sentences": 0,
                                       "train_mix": [{"data_dir": str(extra), "split": "train", "copies": 2}]})
    log = RunLog(tmp_path / "log.jsonl", echo=False)
    data = prepare_data(recipe, tmp_path, log)
    decode = data.tokenizer.decode
    assert [decode(ids) for ids in data.train.src] == ["a b en", "c d en", "e f en"] + ["g h en", "i j en"] * 2
    assert [decode(ids) for ids in data.train.tgt] == ["a b de", "c d de", "e f de"] + ["g h de", "i j de"] * 2
    assert len(data.valid) == 1
    with pytest.raises(RecipeError, match="alignment labels cover train_split only"):
        prepare_data(recipe, tmp_path, log, alignment_labels=True)
