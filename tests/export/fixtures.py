"""Tiny exported models for the export and service tests, made once per test session.

`ending_model` is an untrained tiny Transformer nudged to end its sentences: EOS gets a logit
boost along one direction of the final LayerNorm's bias, so hypotheses finish after a few tokens
instead of running to the length limit (where CTranslate2's search and ours are not meant to
agree: it keeps the best candidates, ours forces EOS).
"""
from __future__ import annotations

from pathlib import Path

import torch

from model.model_dir import save_model_dir
from model.config import AttentionConfig
from model.transformer import Transformer
from export.pipeline import ExportRequest, run_export
from tests.conftest import read_lines
from tests.helpers import randomise_biases, tiny_model


def _everywhere(kind: str, **options) -> dict:
    """One attention kind at all three sites, on a model with one encoder layer (every encoder
    layer is alike) and two decoder layers (the alignment layer, and one whose cross-attention
    takes the no-weights path, e.g. ConvKV's fused kernel). Fewer layers: shorter ONNX exports."""
    attention = AttentionConfig(kind, options)
    return dict(encoder_layers=1, decoder_layers=2, encoder_self_attention=attention,
                decoder_self_attention=attention, cross_attention=attention)


# The model configs every export test runs on (tiny_config overrides by id): the vanilla
# Transformer and each phrasal kind x structure of the trained recipes (recipes/*-tiny-en-de.json).
# Helpers adding model parts add their configs here.
MODEL_CONFIGS: dict[str, dict] = {
    "vanilla": {},
    **{
        f"{kind}-{name}": _everywhere(kind, **options)
        for kind in ("convkv", "queryk")
        for name, options in {
            "homogeneous-2x2": {"structure": "homogeneous", "ngrams": [1, 2], "heads_per_ngram": [2, 2]},
            "heterogeneous-1-2-3": {"structure": "heterogeneous", "ngrams": [1, 2, 3]},
            "interleaved": {"structure": "interleaved", "ngrams": [1, 2]},
        }.items()
    },
}
PHRASAL_CONFIGS = [name for name in MODEL_CONFIGS if name != "vanilla"]
# The other model families (recipes/{fine2d-cross,phrase-representation,alignment-biases}-tiny-en-de.json),
# each on the layer counts of the phrasal configs; bias weights are made random (ending_model).
MODEL_CONFIGS.update({
    "fine2d-cross": dict(encoder_layers=1, decoder_layers=2, cross_attention=AttentionConfig("fine2d", {})),
    "phrase-representation": dict(encoder_layers=1, decoder_layers=2, phrase_representation={
        "pooling": "attentive", "glance": "max", "activation": "sigmoid", "decoder_combination": "attentive",
        "transparent": True}),
    # The other forms offered beside the papers' (model/attention/fine2d.py, model/phrase_representation/options.py).
    "fine2d-cross-mlp": dict(encoder_layers=1, decoder_layers=2, cross_attention=AttentionConfig("fine2d", {"score": "mlp"})),
    # Choi et al.'s +C: the paper's score with the source embeddings contextualised (model/embedding.py).
    "fine2d-cross-mlp-contextual": dict(encoder_layers=1, decoder_layers=2, contextual_source_embeddings=True,
                                        cross_attention=AttentionConfig("fine2d", {"score": "mlp"})),
    "phrase-representation-ablation": dict(encoder_layers=1, decoder_layers=2, phrase_representation={
        "pooling": "max", "activation": "relu", "decoder_combination": "residual", "transparent": False}),
    "alignment-biases": dict(encoder_layers=1, decoder_layers=2,
                             alignment_biases={"position": {}, "markov": {"window": 1, "form": "parallel"}, "fertility": {"window": 1, "form": "parallel"}}),
    # The paper's form (Cohn et al. §3.2–§3.3): the state carries the biased rows, under the same names.
    "alignment-biases-recurrent": dict(encoder_layers=1, decoder_layers=2, alignment_biases={
        "position": {}, "markov": {"window": 1, "form": "recurrent"}, "fertility": {"window": 1, "form": "recurrent"}}),
})

EOS_BOOST = 6.0
# Per config where 6 ends too early or too late: chosen so that beam 3 over the first 8 test
# sentences gives hypotheses of at least four lengths, none at the length limit.
EOS_BOOSTS = {"convkv-homogeneous-2x2": 3.0, "convkv-heterogeneous-1-2-3": 5.0, "queryk-homogeneous-2x2": 4.0,
              "queryk-heterogeneous-1-2-3": 3.0, "fine2d-cross": 5.0, "phrase-representation": 5.0,
              "fine2d-cross-mlp-contextual": 4.0}
_model_dirs: dict[str, Path] = {}
_exports: dict[tuple, Path] = {}


def ending_model(seed: int = 0, eos_boost: float = EOS_BOOST, **overrides) -> Transformer:
    model = randomise_biases(tiny_model(seed, **overrides), seed)
    with torch.no_grad():
        direction = torch.nn.functional.normalize(torch.randn(model.config.d_model, generator=torch.Generator().manual_seed(seed)), dim=0)
        model.decoder_norm.bias += eos_boost * direction  # (D,)
        output = model.source_embedding.tokens.weight if model.output_projection is None else model.output_projection.weight
        output[model.config.eos_id] += direction  # EOS logit ≈ +eos_boost at every step: short hypotheses
        # Like a trained model, give PAD and BOS (never targets) no probability: CTranslate2
        # suppresses them before its softmax, ours after (export/ct2_runner.py).
        output[model.config.pad_id] -= 2 * direction
        output[model.config.bos_id] -= 2 * direction
    return model


def model_dir(tmp_path_factory, tiny_spm: Path, config_id: str = "vanilla") -> Path:
    if config_id not in _model_dirs:
        path = tmp_path_factory.mktemp(f"model-{config_id}") / "en-de"
        model = ending_model(eos_boost=EOS_BOOSTS.get(config_id, EOS_BOOST), **MODEL_CONFIGS[config_id])
        _model_dirs[config_id] = save_model_dir(path, model, tiny_spm, source_lang="en", target_lang="de")
    return _model_dirs[config_id]


def exported(tmp_path_factory, tiny_spm: Path, target: str, config_id: str = "vanilla", **options) -> Path:
    """An unverified export (verification has its own tests); the same one for the whole session."""
    key = (target, config_id, tuple(sorted(options.items())))
    if key not in _exports:
        source = model_dir(tmp_path_factory, tiny_spm, config_id)
        out = tmp_path_factory.mktemp(f"export-{target}-{config_id}") / "out"
        run_export(ExportRequest(target=target, model_dir=source, out_dir=out, verify=False, **options), log=lambda _: None)
        _exports[key] = out
    return _exports[key]


def sentences(limit: int = 12) -> list[str]:
    return read_lines("test_2016_flickr", "en", limit)


# alignment "phrase": the token map and the phrase map (the model's own phrases for phrasal models).
REQUEST = {"text": ["Two dogs play in the snow.", "", "A man  rides a bicycle."], "source": "en", "target": "de",
           "beam_size": 3, "n_best": 1, "alignment": "phrase"}


def served(settings, body: dict = REQUEST) -> list:
    """POST /translate to an app started with `settings` (default runtime factory); the translations."""
    from service.app import create_app
    from tests.service.support import serving

    with serving(create_app(settings)) as client:
        response = client.post("/translate", json=body)
        assert response.status_code == 200, response.text
        assert client.get("/health").json()["pairs"] == ["en-de"]
        return response.json()["translations"]


def same_translations(got: list, expected: list, score_atol: float) -> None:
    """Texts, alignments and phrase maps identical, scores within `score_atol`, link weights and
    phrase confidences within 1e-3."""
    import pytest

    assert [[h["text"] for h in nbest] for nbest in got] == [[h["text"] for h in nbest] for nbest in expected]
    for nbest_got, nbest_expected in zip(got, expected):
        for a, b in zip(nbest_got, nbest_expected):
            assert a["score"] == pytest.approx(b["score"], abs=score_atol)
            assert a["alignment"]["pharaoh"] == b["alignment"]["pharaoh"]
            assert a["alignment"]["source_words"] == b["alignment"]["source_words"]
            assert a["alignment"]["target_words"] == b["alignment"]["target_words"]
            for links_a, links_b in zip(a["alignment"]["links"], b["alignment"]["links"]):
                assert [l["source"] for l in links_a] == [l["source"] for l in links_b]
                assert [l["weight"] for l in links_a] == pytest.approx([l["weight"] for l in links_b], abs=1e-3)
            if "phrases" in b:
                assert a["phrases"]["origin"] == b["phrases"]["origin"]
                assert [(p["source"], p["target"]) for p in a["phrases"]["pairs"]] == [(p["source"], p["target"]) for p in b["phrases"]["pairs"]]
                assert [p["confidence"] for p in a["phrases"]["pairs"]] == pytest.approx([p["confidence"] for p in b["phrases"]["pairs"]], abs=1e-3)
