"""POST /translate end to end through TestClient with the deterministic FakeRuntime."""

from __future__ import annotations

import pytest
from service.runtime.base import DecodingOptions


def test_one_text_exact_response(translate):
    response = translate(text="a small dog")
    assert response.status_code == 200
    assert response.json() == {
        "source": "en",
        "target": "de",
        "model": "en-de",  # the fixture's bare runtime, named after its pair
        "translations": [[{"text": "DOG SMALL A", "score": -0.5}]],
    }


def test_a_list_of_texts_keeps_its_order_in_one_runtime_call(translate, runtime):
    response = translate(text=["one two", "three", "four five six"])
    assert response.status_code == 200
    texts = [[h["text"] for h in nbest] for nbest in response.json()["translations"]]
    assert texts == [["TWO ONE"], ["THREE"], ["SIX FIVE FOUR"]]
    assert [call[0] for call in runtime.calls] == [["one two", "three", "four five six"]]


def test_n_best_lists_hypotheses_best_first(translate, runtime):
    response = translate(text="red green blue", beam_size=4, n_best=3)
    assert response.status_code == 200
    assert response.json()["translations"] == [
        [
            {"text": "BLUE GREEN RED", "score": -0.5},
            {"text": "GREEN RED BLUE", "score": -1.0},
            {"text": "RED BLUE GREEN", "score": -1.5},
        ]
    ]
    # The method the server chose: the fake runtime's own.
    assert runtime.calls[0][1] == DecodingOptions(beam_size=4, n_best=3, alignment="none", alignment_method="attention")


def test_omitted_beam_is_the_server_default_widened_to_n_best(translate, runtime):
    assert translate(text="a").status_code == 200
    assert translate(text="a", n_best=7).status_code == 200
    assert [call[1].beam_size for call in runtime.calls] == [5, 7]
    # The decoding limits come from the settings.
    assert runtime.calls[0][1] == DecodingOptions(
        beam_size=5, n_best=1, max_length_ratio=1.5, max_length_offset=10, length_penalty=1.0, alignment_method="attention"
    )


def test_token_alignment_exact_and_offsets_slice_back_to_the_words(translate):
    source = "hello  big world"  # two spaces: offsets are characters of this exact string
    response = translate(text=source, alignment="token")
    assert response.status_code == 200
    (hypothesis,) = response.json()["translations"][0]
    target = hypothesis["text"]
    assert target == "WORLD BIG HELLO"
    alignment = hypothesis["alignment"]
    assert alignment["source_words"] == [
        {"text": "hello", "start": 0, "end": 5},
        {"text": "big", "start": 7, "end": 10},
        {"text": "world", "start": 11, "end": 16},
    ]
    assert alignment["target_words"] == [
        {"text": "WORLD", "start": 0, "end": 5},
        {"text": "BIG", "start": 6, "end": 9},
        {"text": "HELLO", "start": 10, "end": 15},
    ]
    for word in alignment["source_words"]:
        assert source[word["start"] : word["end"]] == word["text"]
    for word in alignment["target_words"]:
        assert target[word["start"] : word["end"]] == word["text"]
    # Fake attention: 0.8 on the aligned word's pieces + 0.2 spread over all 5 source pieces
    # ("▁hel" "lo" "▁big" "▁wor" "ld"); a two-piece word collects 0.8 + 2 * 0.04.
    assert alignment["links"] == [
        [{"source": 2, "weight": 0.88}, {"source": 0, "weight": 0.08}, {"source": 1, "weight": 0.04}],
        [{"source": 1, "weight": 0.84}, {"source": 0, "weight": 0.08}, {"source": 2, "weight": 0.08}],
        [{"source": 0, "weight": 0.88}, {"source": 2, "weight": 0.08}, {"source": 1, "weight": 0.04}],
    ]
    assert alignment["pharaoh"] == "0-2 1-1 2-0"


def test_every_n_best_hypothesis_gets_its_own_alignment(translate):
    response = translate(text="red green blue", beam_size=2, n_best=2, alignment="token")
    first, second = response.json()["translations"][0]
    assert first["alignment"]["pharaoh"] == "0-2 1-1 2-0"
    assert second["text"] == "GREEN RED BLUE"
    assert second["alignment"]["pharaoh"] == "0-1 1-0 2-2"
    for hypothesis in (first, second):
        for word in hypothesis["alignment"]["target_words"]:
            assert hypothesis["text"][word["start"] : word["end"]] == word["text"]


def test_no_alignment_key_unless_asked(translate):
    (hypothesis,) = translate(text="a b", alignment="none").json()["translations"][0]
    assert set(hypothesis) == {"text", "score"}


@pytest.mark.parametrize(
    "empty",
    [
        "",
        "   ",
        # Nothing visible: zero-width joiner, invisible separator, soft hyphen, a combining accent
        # with no letter, private use, zero-width space and non-joiner, byte-order mark.
        "\u200d", "\u2063", "\u00ad", "\u0301", "\ue000", "\u200b", "\u200c", "\ufeff",
        " \u200b\u0301 \ufeff\t",
    ],
)
def test_a_text_with_nothing_visible_comes_back_as_sent_without_a_runtime_call(translate, runtime, empty):
    response = translate(text=empty, alignment="token")
    assert response.status_code == 200
    assert response.json()["translations"] == [
        [
            {
                "text": empty,
                "score": 0.0,
                "alignment": {"source_words": [], "target_words": [], "links": [], "pharaoh": "", "possible_omissions": [], "possible_insertions": []},
            }
        ]
    ]
    assert runtime.calls == []


def test_empty_texts_in_a_list_are_answered_in_place(translate, runtime):
    response = translate(text=["", "x y", ""])
    assert [[h["text"] for h in nbest] for nbest in response.json()["translations"]] == [[""], ["Y X"], [""]]
    assert [call[0] for call in runtime.calls] == [["x y"]]


def test_language_codes_are_case_insensitive(client):
    response = client.post("/translate", json={"text": "a b", "source": "EN", "target": " De"})
    assert response.status_code == 200
    assert response.json()["source"] == "en" and response.json()["target"] == "de"
