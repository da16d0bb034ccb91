"""The service on the real default factory (torch runtime) with a tiny untrained model saved to a
model directory: the wiring, the real SentencePiece offsets and the alignment shape contract.
The model is untrained, so only properties that hold for any output are asserted."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from model.artifacts import save_model_dir
from service.app import create_app
from service.settings import Settings
from tests.helpers import tiny_model


@pytest.fixture
def torch_client(tmp_path, tiny_spm):
    path = save_model_dir(tmp_path / "en-de", tiny_model(), tiny_spm, source_lang="en", target_lang="de")
    settings = Settings(model_dirs=[path], device="cpu", max_length_offset=4)
    with TestClient(create_app(settings)) as client:  # default factory: torch_runtime.load_runtimes
        yield client


def test_torch_backend_translates_with_alignments_that_slice_back(torch_client):
    sources = ["Two dogs play in the snow.", "", "A man  rides a bicycle."]
    response = torch_client.post(
        "/translate",
        json={"text": sources, "source": "en", "target": "de", "beam_size": 3, "n_best": 2, "alignment": "token"},
    )
    assert response.status_code == 200, response.text
    assert torch_client.get("/health").json() == {"status": "ok", "pairs": ["en-de"]}
    results = response.json()["translations"]
    assert len(results) == 3
    assert results[1] == [
        {"text": "", "score": 0.0, "alignment": {"source_words": [], "target_words": [], "links": [], "pharaoh": ""}}
    ]
    for source, nbest in zip(sources, results):
        if not source:
            continue
        assert 1 <= len(nbest) <= 2
        assert nbest[0]["score"] >= nbest[-1]["score"]
        for hypothesis in nbest:
            alignment = hypothesis["alignment"]
            assert [w["text"] for w in alignment["source_words"]] == source.split()
            for word in alignment["source_words"]:
                assert source[word["start"] : word["end"]] == word["text"]
            for word in alignment["target_words"]:
                assert hypothesis["text"][word["start"] : word["end"]] == word["text"]
            assert len(alignment["links"]) == len(alignment["target_words"])
            hard = []
            for j, links in enumerate(alignment["links"]):
                assert sum(link["weight"] for link in links) == pytest.approx(1.0, abs=1e-5)
                assert links == sorted(links, key=lambda link: -link["weight"])
                hard.append(f"{links[0]['source']}-{j}")
            expected = sorted(hard, key=lambda pair: tuple(map(int, pair.split("-"))))
            assert alignment["pharaoh"] == " ".join(expected)
