"""The service on the torchscript backend (settings.backend="torchscript", the default runtime factory) answers
the same request as the torch backend on the model the export was made from: same texts and word
alignments, scores within 1e-4."""
from __future__ import annotations

import pytest

from service.settings import Settings
from tests.export.fixtures import exported, model_dir, same_translations, served


@pytest.mark.parametrize("config_id", ["vanilla", "convkv-interleaved", "alignment-biases"])
def test_torchscript_backend_answers_like_the_torch_backend(config_id, tmp_path_factory, tiny_spm):
    source = model_dir(tmp_path_factory, tiny_spm, config_id)
    export = exported(tmp_path_factory, tiny_spm, "torchscript", config_id)
    expected = served(Settings(model_dirs=[source], device="cpu", backend="torch"))
    got = served(Settings(model_dirs=[source], device="cpu", backend="torchscript", export_dirs=[export]))
    assert got[1] == [{"text": "", "score": 0.0, "alignment": {"source_words": [], "target_words": [], "links": [], "pharaoh": "",
                                                      "possible_omissions": [], "possible_insertions": []},
                       "phrases": {"origin": "extracted", "pairs": []}}]
    # A phrasal model's phrase map is its own attended phrases (n-grams or phrase-representation
    # chunks), from the graph's phrase_attention output; other models' are extracted from the links.
    assert got[0][0]["phrases"]["origin"] == ("extracted" if config_id in ("vanilla", "alignment-biases") else "attention")
    same_translations(got, expected, score_atol=1e-4)
