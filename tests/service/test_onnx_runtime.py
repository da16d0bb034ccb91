"""The service on the onnx backend (settings.backend="onnx", the default runtime factory) answers
the same request as the torch backend on the model the export was made from: same texts and word
alignments, scores within 1e-4."""
from __future__ import annotations

import pytest

from service.settings import Settings
from tests.export.fixtures import exported, model_dir, same_translations, served


# A phrasal model too (its export is shared with tests/export/test_graph_equivalence.py).
@pytest.mark.parametrize("config_id", ["vanilla", "queryk-heterogeneous-1-2-3", "phrase-representation"])
def test_onnx_backend_answers_like_the_torch_backend(config_id, tmp_path_factory, tiny_spm):
    source = model_dir(tmp_path_factory, tiny_spm, config_id)
    export = exported(tmp_path_factory, tiny_spm, "onnx", config_id)
    expected = served(Settings(model_dirs=[source], device="cpu", backend="torch"))
    got = served(Settings(model_dirs=[source], device="cpu", backend="onnx", export_dirs=[export]))
    assert got[1] == [{"text": "", "score": 0.0, "alignment": {"source_words": [], "target_words": [], "links": [], "pharaoh": "",
                                                      "possible_omissions": [], "possible_insertions": []},
                       "phrases": {"origin": "extracted", "pairs": []}}]
    # A phrasal model's phrase map is its own attended phrases (n-grams or phrase-representation
    # chunks), from the graph's phrase_attention output; other models' are extracted from the links.
    assert got[0][0]["phrases"]["origin"] == ("extracted" if config_id in ("vanilla", "alignment-biases") else "attention")
    same_translations(got, expected, score_atol=1e-4)


def test_a_capability_the_export_lacks_is_a_422_naming_the_field(tmp_path_factory, tiny_spm):
    from export.runners import open_runner
    from service.app import create_app
    from service.runtime.exported import ExportedRuntime
    from tests.service.support import serving

    runner = open_runner(exported(tmp_path_factory, tiny_spm, "onnx"))
    runner.has_attention = False  # as an export whose step graph returns no attention
    settings = Settings(model_dirs=[model_dir(tmp_path_factory, tiny_spm)], device="cpu")
    with serving(create_app(settings, runtime_factory=lambda _: [ExportedRuntime(runner, "onnx")])) as client:
        body = {"text": "A dog.", "source": "en", "target": "de", "alignment": "token"}
        response = client.post("/translate", json=body)
        assert response.status_code == 422
        reason = ('the onnx export serving en-de returns no attention, so it cannot give token alignments; '
                  'ask with alignment="none"')
        assert response.json()["detail"] == [{"field": "alignment", "loc": ["body", "alignment"], "msg": reason, "type": "unsupported_option"}]
        assert client.post("/translate", json={**body, "alignment": "none"}).status_code == 200


def test_export_backends_without_export_dirs_fail_startup_with_the_reason():
    import pytest

    from service.app import load_default_runtimes

    with pytest.raises(ValueError, match=r"^backend 'onnx' serves exported models: set export_dirs"):
        load_default_runtimes(Settings(backend="onnx"))


def test_an_export_without_phrase_attention_refuses_phrase_alignments_with_a_422(tmp_path_factory, tiny_spm):
    from export.runners import open_runner
    from service.app import create_app
    from service.runtime.exported import ExportedRuntime
    from tests.service.support import serving

    runner = open_runner(exported(tmp_path_factory, tiny_spm, "onnx"))
    runner.has_phrase_attention = False  # as an export made before the step graph's phrase_attention output
    settings = Settings(model_dirs=[model_dir(tmp_path_factory, tiny_spm)], device="cpu")
    with serving(create_app(settings, runtime_factory=lambda _: [ExportedRuntime(runner, "onnx")])) as client:
        body = {"text": "A dog.", "source": "en", "target": "de", "alignment": "phrase"}
        response = client.post("/translate", json=body)
        assert response.status_code == 422
        reason = ('the onnx export serving en-de was made without its phrase attention, so it cannot give phrase '
                  'alignments; re-export it, or ask with alignment="token"')
        assert response.json()["detail"] == [{"field": "alignment", "loc": ["body", "alignment"], "msg": reason, "type": "unsupported_option"}]
        assert client.post("/translate", json={**body, "alignment": "token"}).status_code == 200
