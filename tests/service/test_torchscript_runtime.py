"""The service on the torchscript backend (settings.backend="torchscript", the default runtime factory) answers
the same request as the torch backend on the model the export was made from: same texts and word
alignments, scores within 1e-4."""
from __future__ import annotations

from service.settings import Settings
from tests.export.fixtures import exported, model_dir, same_translations, served


def test_torchscript_backend_answers_like_the_torch_backend(tmp_path_factory, tiny_spm):
    source = model_dir(tmp_path_factory, tiny_spm)
    export = exported(tmp_path_factory, tiny_spm, "torchscript")
    expected = served(Settings(model_dirs=[source], device="cpu", backend="torch"))
    got = served(Settings(model_dirs=[source], device="cpu", backend="torchscript", export_dirs=[export]))
    assert got[1] == [{"text": "", "score": 0.0, "alignment": {"source_words": [], "target_words": [], "links": [], "pharaoh": ""}}]
    same_translations(got, expected, score_atol=1e-4)
