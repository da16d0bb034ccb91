"""The phrase-representation recipes: the tiny recipe with phrase representations (and, combined,
heterogeneous QueryK self-attention); everything else is the tiny recipe's."""
import json
from pathlib import Path

import pytest

from training.recipe import load_recipe

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
QUERYK = {"kind": "queryk", "options": {"structure": "heterogeneous", "ngrams": [1, 2, 3]}}
# The paper's system (Xu et al. 2020), every option named: attentive pooling with a max glance, the
# sigmoid attentive combination in the encoder and every decoder layer, transparent attention.
PAPER = {"pooling": "attentive", "glance": "max", "activation": "sigmoid", "decoder_combination": "attentive",
         "transparent": True}
EXTRA = {
    "phrase-representation-tiny-en-de": {"phrase_representation": PAPER},
    "phrase-representation-queryk-tiny-en-de": {
        "phrase_representation": PAPER,
        "encoder_self_attention": QUERYK,
        "decoder_self_attention": QUERYK,
    },
}


@pytest.mark.parametrize("name", list(EXTRA))
def test_recipe_is_the_tiny_recipe_plus_phrase_representations(name):
    tiny = json.loads((RECIPES / "transformer-tiny-en-de.json").read_text())
    recipe = load_recipe(RECIPES / f"{name}.json")
    reference = load_recipe(RECIPES / "transformer-tiny-en-de.json").to_dict()
    data = recipe.to_dict()
    assert data["name"] == name
    assert {k: v for k, v in data.items() if k not in ("name", "model")} == {
        k: v for k, v in reference.items() if k not in ("name", "model")
    }
    assert recipe.model == {**tiny["model"], **EXTRA[name]}
    config = recipe.model_config(10000)
    assert dict(config.phrase_representation) == PAPER
    assert config.cross_attention.kind == "vanilla"
    expected_self = "queryk" if "queryk" in name else "vanilla"
    assert (config.encoder_self_attention.kind, config.decoder_self_attention.kind) == (expected_self, expected_self)
