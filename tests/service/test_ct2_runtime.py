"""The service on the ct2 backend (settings.backend="ct2", the default runtime factory) answers
the same request as the torch backend on the model the export was made from: same texts and word
alignments, scores within 1e-3."""
from __future__ import annotations

from service.settings import Settings
from tests.export.fixtures import exported, model_dir, same_translations, served


def test_ct2_backend_answers_like_the_torch_backend(tmp_path_factory, tiny_spm):
    source = model_dir(tmp_path_factory, tiny_spm)
    export = exported(tmp_path_factory, tiny_spm, "ct2", quantization="float32")
    expected = served(Settings(model_dirs=[source], device="cpu", backend="torch"))
    got = served(Settings(model_dirs=[source], device="cpu", backend="ct2", export_dirs=[export]))
    assert got[1] == [{"text": "", "score": 0.0, "alignment": {"source_words": [], "target_words": [], "links": [], "pharaoh": "",
                                                      "possible_omissions": [], "possible_insertions": []},
                       "phrases": {"origin": "extracted", "pairs": []}}]
    same_translations(got, expected, score_atol=1e-3)


def test_an_export_names_the_precision_it_was_made_with(tmp_path_factory, tiny_spm):
    from service.runtime.exported import load_exported_runtime

    for quantization in ("float32", "int8"):
        export = exported(tmp_path_factory, tiny_spm, "ct2", quantization=quantization)
        assert load_exported_runtime(export, "cpu", "ct2").precision == quantization
