"""The service on the real default factory (torch runtime) with a tiny untrained model saved to a
model directory: the wiring, the real SentencePiece offsets and the alignment shape contract.
The model is untrained, so only properties that hold for any output are asserted."""

from __future__ import annotations

import threading

import pytest

from model.model_dir import save_model_dir
from service.app import create_app
from service.settings import Settings
from tests.helpers import tiny_model
from tests.service.support import Background, queued, serving, wait_until


@pytest.fixture
def torch_client(tmp_path, tiny_spm):
    path = save_model_dir(tmp_path / "en-de", tiny_model(), tiny_spm, source_lang="en", target_lang="de")
    settings = Settings(model_dirs=[path], device="cpu", max_length_offset=4)
    with serving(create_app(settings)) as client:  # default factory: torch_runtime.load_runtime
        yield client


def test_torch_backend_translates_with_alignments_that_slice_back(torch_client):
    sources = ["Two dogs play in the snow.", "", "A man  rides a bicycle."]
    response = torch_client.post(
        "/translate",
        json={"text": sources, "source": "en", "target": "de", "beam_size": 3, "n_best": 2, "alignment": "token"},
    )
    assert response.status_code == 200, response.text
    assert torch_client.get("/health").json() == {"status": "ok", "phase": "ready", "pairs": ["en-de"]}
    results = response.json()["translations"]
    assert len(results) == 3
    assert results[1] == [
        {"text": "", "score": 0.0, "alignment": {"source_words": [], "target_words": [], "links": [], "pharaoh": "",
                                                "possible_omissions": [], "possible_insertions": []}}
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


def approx_json(value):
    """Floats compared to 1e-4: a padded batch may move the last bits of a score."""
    if isinstance(value, float):
        return pytest.approx(value, abs=1e-4)
    if isinstance(value, list):
        return [approx_json(v) for v in value]
    if isinstance(value, dict):
        return {k: approx_json(v) for k, v in value.items()}
    return value


@pytest.fixture
def one_torch_thread():
    """Tiny matrices: a second intra-op thread only spins, and on a busy machine it spins long."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_torch_requests_batched_together_get_what_they_get_alone(tmp_path, tiny_spm, one_torch_thread):
    from service.app import load_default_runtimes

    path = save_model_dir(tmp_path / "en-de", tiny_model(seed=5), tiny_spm, source_lang="en", target_lang="de")
    # Short outputs: the untrained model never says EOS, so every hypothesis runs to the limit.
    settings = Settings(
        model_dirs=[path], device="cpu", max_length_ratio=0.5, max_length_offset=1, warmup=False, max_wait_ms=0
    )
    bodies = [
        {"text": ["Two dogs play in the snow.", "A man."]},
        {"text": "A woman in a red coat walks down a busy street.", "beam_size": 2, "n_best": 2},
        {"text": ["People sit.", "A child runs on the beach."], "alignment": "token"},
        {"text": "Dogs.", "beam_size": 2, "n_best": 2},
        {"text": "A boy jumps into the water."},
    ]
    alone = []
    with serving(create_app(settings)) as client:
        for body in bodies:
            response = client.post("/translate", json={"source": "en", "target": "de", **body})
            assert response.status_code == 200, response.text
            alone.append(response.json())

    gate, entered, calls = threading.Event(), threading.Semaphore(0), []

    def gated_factory(s):
        models = load_default_runtimes(s)
        runtime = models[0].runtime
        translate = runtime.translate_until  # what the batcher calls

        def gated(texts, options, cancelled):  # hold the worker on the first call while the others queue
            calls.append(list(texts))
            entered.release()
            gate.wait()
            return translate(texts, options, cancelled)

        runtime.translate_until = gated
        return models

    app = create_app(settings, runtime_factory=gated_factory)
    with serving(app) as client:
        background = Background(client)
        background.post({"source": "en", "target": "de", "text": "Hold on."})
        assert entered.acquire(timeout=30)
        for body in bodies:
            before = queued(app)
            background.post({"source": "en", "target": "de", **body})
            count = len(body["text"]) if isinstance(body["text"], list) else 1
            wait_until(lambda: queued(app) == before + count, what="texts queued")
        gate.set()
        responses = background.join(timeout=120)
    assert [r.status_code for r in responses] == [200] * 6
    assert [r.json() for r in responses[1:]] == approx_json(alone)
    assert len(calls) == 4  # the held one, then one batch per set of options
    assert sorted(map(len, calls[1:])) == [2, 2, 3]


def test_invisible_characters_leave_the_other_words_offsets_exact(torch_client):
    # Zero-width space, soft hyphen, byte-order mark, invisible separator, private use and a
    # combining accent between visible words: the words are the visible ones, their offsets
    # index the text as sent; a text of nothing else comes back as sent.
    source = "Two\u200b dogs\u00ad play in the\ufeff snow.\u2063 \ue000 caf\u0065\u0301"
    response = torch_client.post(
        "/translate",
        json={"text": [source, "\u200b\u2063\u0301"], "source": "en", "target": "de", "alignment": "token"},
    )
    assert response.status_code == 200, response.text
    visible, invisible = response.json()["translations"]
    words = [(w["text"], w["start"], w["end"]) for w in visible[0]["alignment"]["source_words"]]
    assert words == [
        ("Two", 0, 3), ("dogs", 5, 9), ("play", 11, 15), ("in", 16, 18), ("the", 19, 22), ("snow.", 24, 29),
        ("cafe\u0301", 33, 38),
    ]
    assert all(source[start:end] == text for text, start, end in words)
    assert invisible == [
        {"text": "\u200b\u2063\u0301", "score": 0.0, "alignment": {"source_words": [], "target_words": [], "links": [], "pharaoh": "",
                                                "possible_omissions": [], "possible_insertions": []}}
    ]
