"""Large answers are built off the event loop (service/routes.py), byte for byte the same."""
from __future__ import annotations

import asyncio

import pytest

from service import routes

BODY = {
    "text": ["a small dog", "", "the quick brown fox jumps over"],
    "source": "en",
    "target": "de",
    "beam_size": 4,
    "n_best": 3,
}


@pytest.mark.parametrize("alignment", ["none", "token", "phrase"])
def test_an_answer_built_in_a_thread_is_the_one_built_inline(client, monkeypatch, alignment):
    body = {**BODY, "alignment": alignment}
    monkeypatch.setattr(routes, "_RENDER_INLINE_COST", 10**9)
    inline = client.post("/translate", json=body)

    rendered_on_loop = []
    render = routes._render

    def spy(*args):
        try:
            asyncio.get_running_loop()
            rendered_on_loop.append(True)
        except RuntimeError:  # no loop in this thread: a worker thread
            rendered_on_loop.append(False)
        return render(*args)

    monkeypatch.setattr(routes, "_RENDER_INLINE_COST", -1)
    monkeypatch.setattr(routes, "_render", spy)
    threaded = client.post("/translate", json=body)

    assert rendered_on_loop == [False]
    assert (threaded.status_code, threaded.headers["content-type"]) == (200, "application/json")
    assert threaded.content == inline.content
    assert threaded.json()["translations"][0][0]["text"] == "DOG SMALL A"


def test_the_cost_of_an_answer_grows_with_its_text_and_alignments():
    from service.protected_translation import Served
    from service.runtime.base import Translation

    results = [[Served(Translation(text="x" * 84, score=0.0), [])] * 2]
    assert routes._answer_cost(results, "none") == 200
    assert routes._answer_cost(results, "phrase") == 4000
