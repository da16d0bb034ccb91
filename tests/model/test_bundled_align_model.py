"""The second bundled model, models/en-de-align: models/en-de plus a trained added alignment head,
so every other weight and every translation is the bundled model's."""
from pathlib import Path

import torch

from model.model_dir import load_model_dir
from model.decoding.generate import generate, source_batch
from model.decoding.options import DecodingOptions

MODELS = Path(__file__).resolve().parents[2] / "models"


def test_the_align_model_is_the_bundled_model_plus_its_head():
    plain, aligned = load_model_dir(MODELS / "en-de"), load_model_dir(MODELS / "en-de-align")
    assert aligned.config.supervised_alignment == {"layer": 2, "head": "added", "weight": 1.0}
    own, base = aligned.model.state_dict(), plain.model.state_dict()
    assert sorted(set(own) - set(base)) == [f"supervised_alignment.{p}.{w}" for p in ("k_proj", "q_proj", "query_norm")
                                            for w in ("bias", "weight")]
    assert all(torch.equal(own[name], tensor) for name, tensor in base.items())
    texts = ["Two dogs are playing in the snow.", "A man in a blue shirt is standing on a ladder."]
    options = DecodingOptions(beam_size=3)
    with torch.inference_mode():
        outputs = [[h.tokens for nbest in generate(m.model.eval(), source_batch(m.tokenizer, texts), options) for h in nbest]
                   for m in (plain, aligned)]
    assert outputs[0] == outputs[1]


def test_the_served_align_model_is_the_bundled_model_plus_its_diagonal_head():
    plain, aligned = load_model_dir(MODELS / "en-de"), load_model_dir(MODELS / "en-de-align2")
    assert aligned.config.supervised_alignment == {"layer": 2, "head": "added", "weight": 1.0, "heads": 4,
                                                   "diagonal": True, "link_threshold": 0.07}
    assert aligned.model.supervised_alignment.needs_finished_target
    own, base = aligned.model.state_dict(), plain.model.state_dict()
    assert sorted(set(own) - set(base)) == ["supervised_alignment.diagonal_weight"] + [
        f"supervised_alignment.{p}.{w}" for p in ("k_proj", "q_proj", "query_norm") for w in ("bias", "weight")]
    assert all(torch.equal(own[name], tensor) for name, tensor in base.items())
    texts = ["Two dogs are playing in the snow.", "A man in a blue shirt is standing on a ladder."]
    with torch.inference_mode():
        found = [generate(m.model.eval(), source_batch(m.tokenizer, texts),
                          DecodingOptions(beam_size=3, alignment="token" if m is aligned else "none",
                                          alignment_method="supervised")) for m in (plain, aligned)]
    assert [h.tokens for nbest in found[0] for h in nbest] == [h.tokens for nbest in found[1] for h in nbest]
    assert all(h.supervised_attention is not None for nbest in found[1] for h in nbest)
