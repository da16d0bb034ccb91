"""The alignment-biases recipe: the tiny recipe's model and training, with all three bias terms in the
paper's (recurrent) form, named explicitly; the study names the form of every bias run."""
import json
from pathlib import Path

from training.recipe import load_recipe

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
ALL = {"position": {}, "markov": {"window": 1, "form": "recurrent"}, "fertility": {"window": 1, "form": "recurrent"}}
STUDY = Path(__file__).resolve().parents[2] / "studies" / "en-de.json"


def test_alignment_bias_recipe_is_the_tiny_recipe_with_the_biases():
    tiny = json.loads((RECIPES / "transformer-tiny-en-de.json").read_text())
    recipe = load_recipe(RECIPES / "alignment-biases-tiny-en-de.json")
    data, reference = recipe.to_dict(), load_recipe(RECIPES / "transformer-tiny-en-de.json").to_dict()
    assert data["name"] == "alignment-biases-tiny-en-de"
    assert {k: v for k, v in data.items() if k not in ("name", "model")} == {
        k: v for k, v in reference.items() if k not in ("name", "model")
    }
    assert {k: v for k, v in recipe.model.items() if k != "alignment_biases"} == tiny["model"]
    config = recipe.model_config(10000)
    assert config.to_dict()["alignment_biases"] == ALL
    assert config.cross_attention.kind == "vanilla"
    assert config.alignment_biases["markov"]["form"] == "recurrent"


def test_every_bias_run_of_the_study_names_its_form():
    """Markov and fertility runs say which form they train (the recipe default is the paper's)."""
    runs = json.loads(STUDY.read_text())["runs"]
    forms = {}
    for run in runs:
        biases = run.get("set", {}).get("model.alignment_biases")
        if biases is None:
            biases = json.loads((RECIPES.parent / run["recipe"]).read_text())["model"].get("alignment_biases", {})
        for name in ("markov", "fertility"):
            if name in biases:
                forms[(run["name"], name)] = biases[name]["form"]
    assert forms == {
        ("bias-markov", "markov"): "recurrent",
        ("bias-fertility", "fertility"): "recurrent",
        ("biases-all", "markov"): "recurrent",
        ("biases-all", "fertility"): "recurrent",
        ("biases-all-parallel", "markov"): "parallel",
        ("biases-all-parallel", "fertility"): "parallel",
        ("align-global-fertility-pre", "markov"): "recurrent",
        ("align-global-fertility-pre", "fertility"): "recurrent",
        ("align-global-fertility-pre-control", "markov"): "recurrent",
        ("align-global-fertility-pre-control", "fertility"): "recurrent",
        ("align-symmetric", "markov"): "recurrent",
        ("align-symmetric", "fertility"): "recurrent",
    }
