"""The torch runtime's STATIC_DECODING setting: which search a device gets, and that the static
one translates exactly as the eager one (texts, scores, alignments)."""
from __future__ import annotations

import pytest
import torch

from model.model_dir import load_model_dir, save_model_dir
from service.runtime.base import DecodingOptions
from service.runtime.torch_runtime import TorchRuntime, use_static_decoding
from service.settings import Settings
from tests.helpers import tiny_model
from tests.helpers import TINY_MODEL_OPS, assert_close_for

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_setting_by_device():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert [use_static_decoding(s, cpu) for s in ("on", "off", "auto")] == [True, False, False]
    # auto: on for CUDA (CUDA graphs, measured faster there), off for the CPU (the C kernels decode).
    assert [use_static_decoding(s, cuda) for s in ("on", "off", "auto")] == [True, False, True]
    assert Settings(static_decoding="on").static_decoding == "on"
    with pytest.raises(ValueError, match="static_decoding"):
        Settings(static_decoding="sometimes")


def test_static_runtime_translates_as_the_eager_one(tmp_path, tiny_spm):
    path = save_model_dir(tmp_path / "en-de", tiny_model(seed=2), tiny_spm, source_lang="en", target_lang="de")
    eager = TorchRuntime(load_model_dir(path), torch.device("cpu"))
    static = TorchRuntime(load_model_dir(path), torch.device("cpu"), static_decoding=True)
    assert eager.static is None and static.static is not None
    texts = ["Two dogs play in the snow.", "A man rides a bicycle down a long road.", "Hi."]
    options = DecodingOptions(beam_size=3, n_best=2, alignment="token", max_length_offset=4)
    want, got = eager.translate(texts, options), static.translate(texts, options)
    assert [[t.text for t in n] for n in got] == [[t.text for t in n] for n in want]
    assert [[t.alignment.pharaoh for t in n] for n in got] == [[t.alignment.pharaoh for t in n] for n in want]
    for want_n, got_n in zip(want, got):
        assert_close_for([t.score for t in got_n], [t.score for t in want_n], ops=TINY_MODEL_OPS)


def test_the_service_answers_the_same_with_the_setting_on(tmp_path, tiny_spm, monkeypatch):
    """PHRASAL_STATIC_DECODING reaches the runtime that the service builds (load_runtimes): the
    static search runs only when on, and the answers are the same."""
    from model.decoding.static_decoding import StaticGenerator
    from service.app import create_app
    from tests.service.support import serving

    calls = []
    static_search = StaticGenerator.search

    def counted(self, *args, **kwargs):
        calls.append(1)
        return static_search(self, *args, **kwargs)

    monkeypatch.setattr(StaticGenerator, "search", counted)

    path = save_model_dir(tmp_path / "en-de", tiny_model(seed=2), tiny_spm, source_lang="en", target_lang="de")
    body = {"text": ["Two dogs play in the snow.", "A man rides a bicycle."], "source": "en", "target": "de",
            "beam_size": 3, "n_best": 2, "alignment": "token"}
    answers, static_calls = [], []
    for setting in ("off", "on"):
        calls.clear()
        settings = Settings(model_dirs=[path], device="cpu", max_length_offset=4, static_decoding=setting,
                            inference_process=False)
        with serving(create_app(settings)) as client:
            response = client.post("/translate", json=body)
            assert response.status_code == 200, response.text
            answers.append(response.json()["translations"])
        static_calls.append(len(calls))
    assert static_calls[0] == 0 and static_calls[1] >= 1
    texts = [[[h["text"] for h in nbest] for nbest in answer] for answer in answers]
    assert texts[0] == texts[1]
    assert [[h["alignment"]["pharaoh"] for h in n] for n in answers[0]] == [[h["alignment"]["pharaoh"] for h in n] for n in answers[1]]


TEXTS = ["Two dogs play in the snow.", "A man rides a bicycle down a long road.", "Hi."]


def test_a_batch_nobody_waits_for_stops_on_the_static_path(tmp_path, tiny_spm):
    from service.runtime.base import BatchCancelled

    path = save_model_dir(tmp_path / "en-de", tiny_model(seed=2), tiny_spm, source_lang="en", target_lang="de")
    static = TorchRuntime(load_model_dir(path), torch.device("cpu"), static_decoding=True)
    asked = []

    def cancelled() -> bool:  # the batcher's "nobody waits": true from the third decoding step on
        asked.append(1)
        return len(asked) >= 3

    with pytest.raises(BatchCancelled):
        static.translate_until(TEXTS, DecodingOptions(beam_size=3, max_length_offset=20), cancelled)
    assert len(asked) == 3  # asked between steps, and not again once it said so
    # The runtime serves the next batch as before.
    answer = static.translate_until(TEXTS, DecodingOptions(beam_size=3, max_length_offset=4), lambda: False)
    assert [[t.text for t in n] for n in answer] == [[t.text for t in n] for n in static.translate(TEXTS, DecodingOptions(beam_size=3, max_length_offset=4))]


def test_a_model_static_decoding_cannot_hold_falls_back_to_eager_with_the_reason(tmp_path, tiny_spm, monkeypatch, caplog):
    import model.decoding.static_decoding as static_decoding

    def refuse(before, after):
        raise static_decoding.StaticStateUnsupported("a decoder state tensor changed shape (2, 3) -> (2, 4)")

    monkeypatch.setattr(static_decoding, "grown", refuse)
    path = save_model_dir(tmp_path / "en-de", tiny_model(seed=2), tiny_spm, source_lang="en", target_lang="de")
    eager = TorchRuntime(load_model_dir(path), torch.device("cpu"))
    static = TorchRuntime(load_model_dir(path), torch.device("cpu"), static_decoding=True)
    options = DecodingOptions(beam_size=3, n_best=2, alignment="token", max_length_offset=4)
    with caplog.at_level("WARNING", logger="service.runtime.torch"):
        got = static.translate(TEXTS, options)
    assert [r.getMessage() for r in caplog.records] == [
        "static decoding cannot serve en-de, decoding eagerly from now on: "
        "a decoder state tensor changed shape (2, 3) -> (2, 4)"]
    assert static.static is None
    want = eager.translate(TEXTS, options)
    assert [[(t.text, t.score) for t in n] for n in got] == [[(t.text, t.score) for t in n] for n in want]


def test_warmup_warms_the_buckets_where_steps_are_captured(tmp_path, tiny_spm, monkeypatch):
    """With a capturing runner (CUDA graphs; here a stand-in that counts and runs the step) the
    runtime's warm-up decodes every batch size of the ladder at every source width up to
    WARM_SOURCE_WIDTH with the default options; with the eager runner (the CPU) it does not."""
    from model.decoding import static_decoding
    from service.runtime import torch_runtime

    monkeypatch.setattr(torch_runtime, "BATCH_SIZES", (1, 2))
    monkeypatch.setattr(torch_runtime, "WARM_SOURCE_WIDTH", 16)
    path = save_model_dir(tmp_path / "en-de", tiny_model(seed=2), tiny_spm, source_lang="en", target_lang="de")
    steps = []

    def capturing(decoder, t):
        steps.append(t)
        static_decoding.eager_runner(decoder, t)

    runtimes = [TorchRuntime(load_model_dir(path), torch.device("cpu"), static_decoding=True) for _ in range(2)]
    runtimes[0].static.runner = capturing
    for runtime in runtimes:
        runtime.warmup()
    default = DecodingOptions()
    warmed = {(key[0].batch, key[0].source) for key in runtimes[0].static.decoders if key[1] == default.beam_size}
    assert {(b, w) for b in (1, 2) for w in (8, 16)} <= warmed and steps
    assert all(key[1] != default.beam_size for key in runtimes[1].static.decoders)  # only the base warm-up's


def test_warm_up_prepares_the_default_request_and_the_one_with_word_alignments(tmp_path, tiny_spm, monkeypatch):
    """A request with placeholders, markup or glossary terms decodes with the word alignment, whose
    static decoders (rows kept) differ from the default request's: warm-up makes both, for every
    bucket it warms, so neither captures its step graphs under load. A runner that is not the eager
    one stands in for CUDA graphs (warm-up is skipped on the eager runner)."""
    import service.runtime.torch_runtime as torch_runtime
    from model.decoding.static_decoding import eager_runner

    monkeypatch.setattr(torch_runtime, "BATCH_SIZES", (1, 2))
    monkeypatch.setattr(torch_runtime, "SOURCE_WIDTHS", (8, 16))
    path = save_model_dir(tmp_path / "en-de", tiny_model(seed=2), tiny_spm, source_lang="en", target_lang="de")
    runtime = TorchRuntime(load_model_dir(path), torch.device("cpu"), static_decoding=True)
    runtime.static.runner = lambda decoder, t: eager_runner(decoder, t)
    assert [(o.alignment, o.alignment_method) for o in runtime.warm_options()] == [("none", None), ("token", "attention")]
    runtime.warmup()
    made = {(key[0].batch, key[0].source, key[1:]) for key in runtime.static.decoders}
    for rows in ((5, False, False, False), (5, True, False, False)):  # beam, token rows, phrase rows, head rows
        assert {(b, w, rows) for b in (1, 2) for w in (8, 16)} <= made, rows
    # And a request with word alignments (the service's defaults otherwise) then decodes in what
    # warm-up made, as an unwarmed runtime does.
    fresh = TorchRuntime(load_model_dir(path), torch.device("cpu"), static_decoding=True)
    options = DecodingOptions(alignment="token", alignment_method="attention")
    before = set(runtime.static.decoders)
    got, want = runtime.translate(TEXTS[:2], options), fresh.translate(TEXTS[:2], options)
    assert [[t.text for t in n] for n in got] == [[t.text for t in n] for n in want]
    assert [[t.alignment.pharaoh for t in n] for n in got] == [[t.alignment.pharaoh for t in n] for n in want]
    assert set(runtime.static.decoders) == before


def test_warm_up_prepares_the_services_own_decoding_defaults(tmp_path, tiny_spm):
    """A server configured with another default beam or length limit warms the buckets its requests
    land in (Settings.decoding reaches the runtime through the RuntimeSpec, also across the
    inference process's pickling), not DecodingOptions()'s."""
    import pickle

    from service.app import load_default_runtimes
    from service.runtime.factory import RuntimeSpec

    path = save_model_dir(tmp_path / "en-de", tiny_model(seed=2), tiny_spm, source_lang="en", target_lang="de")
    settings = Settings(model_dirs=[path], device="cpu", default_beam_size=3, max_length_offset=4,
                        static_decoding="on", inference_process=False)
    assert settings.decoding != DecodingOptions()
    (served,) = load_default_runtimes(settings)
    default, aligned = served.runtime.warm_options()
    assert default == settings.decoding
    assert (aligned.beam_size, aligned.max_length_offset, aligned.alignment) == (3, 4, "token")
    spec = RuntimeSpec("torch", path, "cpu", decoding=settings.decoding)
    assert pickle.loads(pickle.dumps(spec)).decoding == settings.decoding
