"""alignment="phrase": the phrase map beside the token map, from the fake runtime (exact values)
and from real tiny models (a phrasal one gives its own attended phrases, a vanilla one extracted
pairs)."""

from __future__ import annotations

import pytest

from model.model_dir import save_model_dir
from model.config import AttentionConfig
from service.app import create_app
from service.settings import Settings
from tests.helpers import tiny_model
from tests.service.support import serving

HETEROGENEOUS = AttentionConfig("queryk", {"structure": "heterogeneous", "ngrams": [1, 2, 3]})


def side(words: list[int], start: int, end: int, text: str) -> dict:
    return {"words": words, "start": start, "end": end, "text": text}


def test_fake_runtime_reversal_gives_one_crossing_pair_per_word(client):
    response = client.post("/translate", json={"text": "two dogs play", "source": "en", "target": "de", "alignment": "phrase"})
    assert response.status_code == 200, response.text
    (hypothesis,) = response.json()["translations"][0]
    assert hypothesis["text"] == "PLAY DOGS TWO"
    assert hypothesis["alignment"]["pharaoh"] == "0-2 1-1 2-0"
    # Each target word holds 0.8 + 0.2/3 of its attention on its own source word.
    assert hypothesis["phrases"] == {
        "origin": "extracted",
        "pairs": [
            {"source": side([2, 3], 9, 13, "play"), "target": side([0, 1], 0, 4, "PLAY"), "confidence": 0.866667},
            {"source": side([1, 2], 4, 8, "dogs"), "target": side([1, 2], 5, 9, "DOGS"), "confidence": 0.866667},
            {"source": side([0, 1], 0, 3, "two"), "target": side([2, 3], 10, 13, "TWO"), "confidence": 0.866667},
        ],
    }


def test_phrase_map_only_when_asked_and_empty_for_empty_text(client):
    body = {"text": ["two dogs", ""], "source": "en", "target": "de"}
    token = client.post("/translate", json={**body, "alignment": "token"}).json()["translations"]
    assert "phrases" not in token[0][0] and "alignment" in token[0][0]
    phrase = client.post("/translate", json={**body, "alignment": "phrase"}).json()["translations"]
    assert phrase[1] == [
        {
            "text": "",
            "score": 0.0,
            "alignment": {"source_words": [], "target_words": [], "links": [], "pharaoh": "", "possible_omissions": [], "possible_insertions": []},
            "phrases": {"origin": "extracted", "pairs": []},
        }
    ]


@pytest.mark.parametrize(("cross", "origin"), [(AttentionConfig(), "extracted"), (HETEROGENEOUS, "attention")], ids=["vanilla", "queryk"])
def test_torch_models_give_phrase_pairs_that_slice_back(tmp_path, tiny_spm, cross, origin):
    model = tiny_model(seed=2, cross_attention=cross)
    path = save_model_dir(tmp_path / "en-de", model, tiny_spm, source_lang="en", target_lang="de")
    settings = Settings(model_dirs=[path], device="cpu", max_length_offset=4, warmup=False)
    source = "Two young dogs play in the deep snow."
    with serving(create_app(settings)) as client:
        response = client.post(
            "/translate", json={"text": source, "source": "en", "target": "de", "alignment": "phrase", "n_best": 2, "beam_size": 2}
        )
    assert response.status_code == 200, response.text
    for hypothesis in response.json()["translations"][0]:
        phrases, alignment = hypothesis["phrases"], hypothesis["alignment"]
        assert phrases["origin"] == origin
        assert phrases["pairs"], "an untrained model still attends somewhere"
        for pair in phrases["pairs"]:
            for name, string, words in (
                ("source", source, alignment["source_words"]),
                ("target", hypothesis["text"], alignment["target_words"]),
            ):
                first, last = pair[name]["words"]
                assert 0 <= first < last <= len(words)
                assert (pair[name]["start"], pair[name]["end"]) == (words[first]["start"], words[last - 1]["end"])
                assert pair[name]["text"] == string[pair[name]["start"] : pair[name]["end"]]
            if origin == "extracted":
                # The mean, over the pair's linked target words, of their link weight inside the source span.
                first, last = pair["source"]["words"]
                inside = [
                    sum(link["weight"] for link in alignment["links"][j] if first <= link["source"] < last)
                    for j in range(*pair["target"]["words"])
                    if alignment["links"][j]
                ]
                assert pair["confidence"] == pytest.approx(sum(inside) / len(inside), abs=1e-5)
            else:
                assert 0.0 < pair["confidence"] <= 1.0  # attention weights: only the model knows them
        if origin == "extracted":
            # Consistent pairs partition the linked target words: none shares a target word.
            covered = [j for pair in phrases["pairs"] for j in range(*pair["target"]["words"])]
            assert len(covered) == len(set(covered))
