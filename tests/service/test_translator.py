"""service.translator.Translator apart from HTTP: which runtime serves a pair, the limits and
defaults it applies, the answers it gives without a model call, and the batchers it builds."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from service.errors import RequestError, UnsupportedPair
from service.runtime.base import DecodingOptions, PhraseMap, TokenAlignment, Translation
from service.schemas import TranslateRequest
from service.served import Served
from service.settings import Settings
from service.translator import Translator
from testing.fake_runtime import FakeRuntime


def settings(**overrides) -> Settings:
    return Settings(**{"max_segments": 4, "max_chars": 40, "max_wait_ms": 250.0, **overrides})


def served(coroutine_of, runtimes=None, **overrides):
    """Run ``coroutine_of(translator)`` with the translator's batchers started, then stop them."""
    runtimes = runtimes if runtimes is not None else [FakeRuntime("en", "de")]

    async def main():
        translator = Translator(runtimes, settings(**overrides))
        translator.start()
        try:
            return await coroutine_of(translator)
        finally:
            await translator.stop()

    return asyncio.run(main())


def test_it_refuses_no_runtime_a_foreign_object_and_two_models_of_one_name():
    with pytest.raises(ValueError, match="^no runtime loaded: nothing to serve$"):
        Translator([], settings())
    with pytest.raises(TypeError, match=r"^str is not a service.runtime.base.TranslationRuntime$"):
        Translator(["en-de"], settings())
    with pytest.raises(ValueError, match="^two models are named 'en-de'$"):
        Translator([FakeRuntime("en", "de"), FakeRuntime("en", "de")], settings())


def test_pairs_runtimes_and_lookup():
    en_de, de_en, en_fr = FakeRuntime("en", "de"), FakeRuntime("de", "en"), FakeRuntime("en", "fr")
    translator = Translator([en_de, de_en, en_fr], settings())
    assert translator.pairs == ["de-en", "en-de", "en-fr"]
    assert translator.runtimes == [en_de, de_en, en_fr]
    assert translator.runtime_for("en", "fr") is en_fr
    assert translator.queued == 0
    with pytest.raises(UnsupportedPair) as info:
        translator.runtime_for("fr", "de")
    assert (info.value.field, info.value.index, info.value.message) == (
        "source", None, "language pair fr-de is not served; served pairs: de-en, en-de, en-fr"
    )


def test_the_batchers_get_the_settings_batch_limits():
    translator = Translator([FakeRuntime()], settings(max_batch_sentences=8, max_batch_tokens=300, max_queue=9,
                                                      worker_threads=2, retry_after_s=3))
    (batcher,) = translator._batchers.values()
    limits = batcher.limits
    assert (limits.max_sentences, limits.max_tokens, limits.max_wait_s, limits.max_queue, limits.workers,
            limits.retry_after_s) == (8, 300, 0.25, 9, 2, 3)


def test_decoding_options_come_from_the_settings_and_an_omitted_beam_is_widened_to_n_best():
    translator = Translator([FakeRuntime()], settings(default_beam_size=4, max_length_ratio=2.5, max_length_offset=3,
                                                      length_penalty=0.5, length_penalty_form="gnmt"))

    def built(**fields) -> DecodingOptions:
        request = TranslateRequest(text="a", source="en", target="de", **fields)
        return request.decoding_options(translator.defaults)

    assert built(alignment="token") == DecodingOptions(
        beam_size=4, n_best=1, alignment="token", max_length_ratio=2.5, max_length_offset=3, length_penalty=0.5,
        length_penalty_form="gnmt",
    )
    assert built(n_best=6).beam_size == 6
    assert built(beam_size=2, n_best=2).beam_size == 2
    assert built(alignment_method="shift").alignment_method == "shift"


def test_defaults_one_hypothesis_per_text_and_errors_name_the_list_item():
    runtime = FakeRuntime()

    async def go(translator):
        results = await translator.translate(["a b", "c"], "en", "de")
        with pytest.raises(RequestError) as info:
            await translator.translate(["ok", "x" * 41], "en", "de")
        return results, info.value

    results, error = served(go, [runtime])
    assert [[(s.translation.text, s.translation.score) for s in nbest] for nbest in results] == [[("B A", -0.5)], [("C", -0.5)]]
    assert runtime.calls[0][1] == DecodingOptions(beam_size=5, n_best=1, alignment="none", alignment_method="attention",
                                                  max_length_ratio=1.5, max_length_offset=10, length_penalty=1.0)
    assert (error.field, error.index, error.message) == ("text", 1, "at most 40 characters per text, got 41")


def test_empty_texts_are_answered_without_the_model_in_every_alignment_mode():
    runtime = FakeRuntime()

    async def go(translator):
        return [[[s.translation for s in nbest] for nbest in
                 await translator.translate(["", " ", "a b"], "en", "de", replace(translator.defaults, alignment=mode))]
                for mode in ("none", "token", "phrase")]

    none, token, phrase = served(go, [runtime])
    # Each comes back as sent: whitespace is the text's layout.
    assert none[:2] == [[Translation(text=text, score=0.0)] for text in ("", " ")]
    assert token[:2] == [[Translation(text=text, score=0.0, alignment=TokenAlignment.empty())] for text in ("", " ")]
    assert phrase[:2] == [[Translation(text=text, score=0.0, alignment=TokenAlignment.empty(),
                                       phrase_map=PhraseMap("extracted", []))] for text in ("", " ")]
    assert [texts for texts, _ in runtime.calls] == [["a b"]] * 3  # only the non-empty text reached the model
    assert phrase[2][0].phrase_map.origin == "extracted" and token[2][0].phrase_map is None


def test_an_empty_request_of_blank_texts_never_calls_the_model():
    runtime = FakeRuntime()
    results = served(lambda t: t.translate(["", "  ", "\n"], "en", "de"), [runtime])
    # Whitespace comes back as sent: gettext wants "\n" for a message "\n".
    assert [[(s.translation.text, s.translation.score) for s in nbest] for nbest in results] == [
        [("", 0.0)], [("  ", 0.0)], [("\n", 0.0)]]
    assert runtime.calls == []


def test_a_translation_still_computing_at_the_deadline_is_a_deadline_exceeded():
    import threading

    from service.errors import DeadlineExceeded

    gate = threading.Event()
    runtime = FakeRuntime(gate=gate)
    # The gate opens long after the 1 s deadline (and always opens, so that nothing hangs):
    # a request that waited for the model would get its translation instead of the error.
    opener = threading.Timer(10.0, gate.set)
    opener.start()

    async def go(translator):
        with pytest.raises(DeadlineExceeded) as info:
            await translator.translate(["a b"], "en", "de")
        gate.set()
        return info.value

    try:
        error = served(go, [runtime], request_timeout_s=1.0, max_wait_ms=0.0)
    finally:
        opener.cancel()
        gate.set()
    assert str(error) == "translation took longer than the 1 s deadline"
    assert runtime.calls[0][0] == ["a b"]  # it had reached the model


def test_forced_alignments_beyond_the_worker_threads_wait_and_time_out_as_a_503():
    import threading

    from service.errors import QueueTimeout

    gate = threading.Event()
    runtime = FakeRuntime("en", "de", gate=gate)

    async def two_at_once(translator):
        first = asyncio.ensure_future(translator.align(["a b"], ["x y"], "en", "de"))
        await asyncio.to_thread(runtime.entered.acquire)  # the first holds the only slot, at the gate
        try:
            with pytest.raises(QueueTimeout) as refused:  # not at the gate beside the first
                await asyncio.wait_for(translator.align(["c"], ["z"], "en", "de"), 10)
        finally:
            gate.set()
        _, method, [(alignment, _)] = await first
        return refused.value, method, alignment.pharaoh

    refused, method, pharaoh = served(two_at_once, [runtime], worker_threads=1, request_timeout_s=0.2)
    assert str(refused) == "server busy: not started within the 0.2 s deadline; retry later"
    assert (method, pharaoh) == ("attention", "0-1 1-0")  # the first still answered, once the gate opened
