"""The alignment-biases recipe: the tiny recipe's model and training, with all three bias terms."""
import json
from pathlib import Path

from training.recipe import load_recipe

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
ALL = {"position": {}, "markov": {"window": 1}, "fertility": {"window": 1}}


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
