"""Global fertility as Cohn et al. (2016, §3.3, Table 2) use it: the from-scratch recipe at the paper's
weight ("+glofer"), the fine-tuning recipe ("+glofer-pre") that adds the term to a trained baseline,
`train --init` adding the head to an initialised model (reported as new weights, the term trained),
and the study's run that starts from the baseline run."""
import json
from pathlib import Path

import pytest
import torch

from model.model_dir import save_model_dir
from model.transformer import Transformer
from tests.training.support import read_log
from training import checkpoints as ckpt
from training.cli import main as train_main
from training.initialization import InitialModel, check_initial_config
from training.recipe import load_recipe
from training.study_spec import load_study

REPO = Path(__file__).resolve().parents[2]
RECIPES = REPO / "recipes"
SMOKE = RECIPES / "smoke.json"
PAPER = {"weight": 1.0, "reduction": "sum", "layer": -1}
HEAD = [f"global_fertility.{layer}.{w}" for layer in ("hidden", "out") for w in ("bias", "weight")]

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("name", ["global-fertility-tiny-en-de", "global-fertility-finetune-tiny-en-de"])
def test_both_recipes_weigh_the_term_as_the_paper_does(name):
    tiny = json.loads((RECIPES / "transformer-tiny-en-de.json").read_text())["model"]
    recipe = load_recipe(RECIPES / f"{name}.json")
    assert recipe.model == {**tiny, "global_fertility": PAPER}
    assert recipe.model_config(10000).to_dict()["global_fertility"] == PAPER


def test_the_finetune_recipe_may_start_from_the_baseline_model():
    baseline = load_recipe(RECIPES / "transformer-tiny-en-de.json").model_config(10000).to_dict()
    finetune = load_recipe(RECIPES / "global-fertility-finetune-tiny-en-de.json").model_config(10000).to_dict()
    initial = InitialModel(Path("baseline"), {}, baseline, Path("spm.model"), "en", "de")
    check_initial_config(finetune, initial, "--init")  # raises when a key other than the head differs


def test_the_study_fine_tunes_the_baseline_run_of_the_same_seed():
    spec = load_study(REPO / "studies" / "en-de.json")
    run = spec.run("global-fertility-pre")
    assert (run.init, run.recipe, run.command) == ("baseline", Path("recipes/global-fertility-finetune-tiny-en-de.json"),
                                                  "train")
    assert set(run.seeds) <= set(spec.run("baseline").seeds)


FAST = ["train_limit=48", "valid_limit=8", "max_tokens=512", "max_len=40", "log_interval=1", "val_interval=100",
        "val_bleu_sentences=0", "checkpoint_interval=2", "keep_last=2", "average_last=1"]


def test_init_adds_the_global_fertility_head_to_a_trained_model_and_reports_it(tmp_path, tiny_spm):
    config = load_recipe(SMOKE).model_config(500)
    assert config.global_fertility is None
    torch.manual_seed(7)
    initial = save_model_dir(tmp_path / "en-de", Transformer(config), tiny_spm, source_lang="en", target_lang="de")
    argv = ["train", "--recipe", str(SMOKE), "--out", str(tmp_path / "run"), "--device", "cpu", "--quiet",
            "--no-export", "--init", str(initial), "--max-updates", "2", "--set", f"data_dir={REPO / 'data' / 'multi30k'}",
            "--set", f"model.global_fertility={json.dumps(PAPER)}"]
    for item in FAST:
        argv += ["--set", item]
    assert train_main(argv) == 0
    event = read_log(tmp_path / "run", "init")[0]
    assert event["path"] == str(initial) and event["new_weights"] == HEAD
    records = read_log(tmp_path / "run", "train")
    assert len(records) == 2 and all(record["fertility"] > 0 for record in records)  # log_interval 1, 2 updates
    payload = ckpt.load_checkpoint(ckpt.list_checkpoints(tmp_path / "run" / "checkpoints")[-1])
    assert payload["config"]["global_fertility"] == PAPER
    assert set(HEAD) <= set(payload["model"])
