"""Structural alignment biases added to a trained model (`train --init` with
recipes/alignment-biases-finetune-tiny-en-de.json): the plain cross-attention weights are copied under
the biased wrapper's `inner`, the bias terms are reported as new weights, and biases a model already
has cannot be changed by a fine-tuning recipe."""
import json
from pathlib import Path

import pytest
import torch

from model.model_dir import load_model_dir, save_model_dir
from model.transformer import Transformer
from tests.training.support import read_log
from training import checkpoints as ckpt
from training.cli import main as train_main
from training.initialization import InitialModel, check_initial_config
from training.recipe import RecipeError, load_recipe

REPO = Path(__file__).resolve().parents[2]
RECIPES = REPO / "recipes"
SMOKE = RECIPES / "smoke.json"
BIASES = {"position": {}, "markov": {"window": 1, "form": "recurrent"}, "fertility": {"window": 1, "form": "recurrent"}}
FAST = ["train_limit=48", "valid_limit=8", "max_tokens=512", "max_len=40", "log_interval=1", "val_interval=100",
        "val_bleu_sentences=0", "checkpoint_interval=2", "keep_last=2", "average_last=1"]

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_finetune_recipe_adds_the_from_scratch_recipes_biases_to_the_baseline():
    baseline = load_recipe(RECIPES / "transformer-tiny-en-de.json").model_config(10000).to_dict()
    scratch = load_recipe(RECIPES / "alignment-biases-tiny-en-de.json").model_config(10000).to_dict()
    finetune = load_recipe(RECIPES / "alignment-biases-finetune-tiny-en-de.json").model_config(10000).to_dict()
    assert finetune["alignment_biases"] == scratch["alignment_biases"] == BIASES
    check_initial_config(finetune, InitialModel(Path("baseline"), {}, baseline, Path("spm.model"), "en", "de"), "--init")


def test_biases_a_model_already_has_cannot_be_changed():
    scratch = load_recipe(RECIPES / "alignment-biases-tiny-en-de.json").model_config(10000).to_dict()
    changed = {**scratch, "alignment_biases": {"position": {}}}
    with pytest.raises(RecipeError) as raised:
        check_initial_config(changed, InitialModel(Path("biased"), {}, scratch, Path("spm.model"), "en", "de"), "--init")
    assert raised.value.problems == [
        "biased has a different model config than the recipe gives (differs in alignment_biases; only "
        "activation_dropout, alignment_biases, alignment_layer, attention_dropout, dropout, global_fertility, "
        "supervised_alignment may change)"]


def test_init_moves_the_cross_attention_under_the_biases_and_lists_the_bias_terms(tmp_path, tiny_spm):
    config = load_recipe(SMOKE).model_config(500)
    torch.manual_seed(7)
    initial_dir = save_model_dir(tmp_path / "en-de", Transformer(config), tiny_spm, source_lang="en", target_lang="de")
    argv = ["train", "--recipe", str(SMOKE), "--out", str(tmp_path / "run"), "--device", "cpu", "--quiet",
            "--no-export", "--init", str(initial_dir), "--max-updates", "2",
            "--set", f"data_dir={REPO / 'data' / 'multi30k'}", "--set", f"model.alignment_biases={json.dumps(BIASES)}",
            "--set", 'trainable=["decoder_layers.0.cross_attention.biases."]']
    for item in FAST:
        argv += ["--set", item]
    assert train_main(argv) == 0

    layers = range(config.decoder_layers)
    terms = ["fertility.weight", "markov.weight"] + [f"position.{p}.{w}" for p in ("hidden", "out") for w in ("bias", "weight")]
    assert read_log(tmp_path / "run", "init")[0]["new_weights"] == sorted(
        f"decoder_layers.{i}.cross_attention.biases.{term}" for i in layers for term in terms)
    trained = ckpt.load_checkpoint(ckpt.list_checkpoints(tmp_path / "run" / "checkpoints")[-1])["model"]
    initial = load_model_dir(initial_dir).model.state_dict()
    moved = [name for name in initial if ".cross_attention." in name]
    assert len(moved) == 8 * config.decoder_layers
    for name, tensor in initial.items():
        assert torch.equal(trained[name.replace(".cross_attention.", ".cross_attention.inner.")], tensor), name
    assert not torch.equal(trained["decoder_layers.0.cross_attention.biases.markov.weight"],
                           torch.zeros_like(trained["decoder_layers.0.cross_attention.biases.markov.weight"]))
