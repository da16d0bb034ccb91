"""The paper-table recipes: the tiny recipe's model and training, with one phrasal kind at all three sites."""
import json
from pathlib import Path

import pytest

from training.recipe import load_recipe

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
SITES = ("encoder_self_attention", "decoder_self_attention", "cross_attention")
# With the tiny model's 4 heads the papers' 4+4 homogeneous split becomes 2+2. Each names the
# paper's edge rule (model/attention/ngram_options.py): left-padded homogeneous heads (§3.2.1),
# and the interleaved decoder sequence's leading zero slot (§3.3, I_dec).
TABLE = {
    "convkv-homogeneous-2x2": ("convkv", {"structure": "homogeneous", "edge": "padded", "ngrams": [1, 2], "heads_per_ngram": [2, 2]}),
    "queryk-homogeneous-2x2": ("queryk", {"structure": "homogeneous", "edge": "padded", "ngrams": [1, 2], "heads_per_ngram": [2, 2]}),
    "convkv-heterogeneous-1-2": ("convkv", {"structure": "heterogeneous", "edge": "inside", "ngrams": [1, 2]}),
    "queryk-heterogeneous-1-2": ("queryk", {"structure": "heterogeneous", "edge": "inside", "ngrams": [1, 2]}),
    "convkv-heterogeneous-1-2-3": ("convkv", {"structure": "heterogeneous", "edge": "inside", "ngrams": [1, 2, 3]}),
    "queryk-heterogeneous-1-2-3": ("queryk", {"structure": "heterogeneous", "edge": "inside", "ngrams": [1, 2, 3]}),
    "convkv-interleaved": ("convkv", {"structure": "interleaved", "edge": "inside", "ngrams": [1, 2]}),
    "queryk-interleaved": ("queryk", {"structure": "interleaved", "edge": "inside", "ngrams": [1, 2]}),
}
# Decoding as the Transformer-base setup these models build on: GNMT length penalty, α = 0.6
# (model/decoding/length_penalty.py); the tiny Transformer recipe keeps the fairseq |y|^1 of its Multi30k anchor.
DECODING = ("decode_length_penalty", "decode_length_penalty_form")


@pytest.mark.parametrize("variant", list(TABLE))
def test_phrasal_recipe_is_the_tiny_recipe_with_phrasal_attention(variant):
    tiny = json.loads((RECIPES / "transformer-tiny-en-de.json").read_text())
    recipe = load_recipe(RECIPES / f"{variant}-tiny-en-de.json")
    kind, options = TABLE[variant]
    data, reference = recipe.to_dict(), load_recipe(RECIPES / "transformer-tiny-en-de.json").to_dict()
    assert data["name"] == f"{variant}-tiny-en-de"
    assert {k: v for k, v in data.items() if k not in ("name", "model", *DECODING)} == {
        k: v for k, v in reference.items() if k not in ("name", "model", *DECODING)
    }
    assert (recipe.decode_length_penalty, recipe.decode_length_penalty_form) == (0.6, "gnmt")
    assert (reference["decode_length_penalty"], reference["decode_length_penalty_form"]) == (1.0, "power")
    assert {k: v for k, v in recipe.model.items() if k not in SITES} == tiny["model"]
    config = recipe.model_config(10000)
    for site in SITES:
        attention = getattr(config, site)
        assert (attention.kind, dict(attention.options)) == (kind, options)


def test_phrasal_smoke_recipe_builds():
    recipe = load_recipe(RECIPES / "smoke-phrasal.json")
    config = recipe.model_config(400)
    assert config.cross_attention.kind == "queryk" and recipe.max_updates <= 100
