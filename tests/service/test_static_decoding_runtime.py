"""The torch runtime's STATIC_DECODING setting: which search a device gets, and that the static
one translates exactly as the eager one (texts, scores, alignments)."""
from __future__ import annotations

import pytest
import torch

from model.model_dir import load_model_dir, save_model_dir
from service.runtime.base import DecodeOptions
from service.runtime.torch_runtime import TorchRuntime, use_static_decoding
from service.settings import Settings
from tests.helpers import tiny_model
from tests.helpers import TINY_MODEL_OPS, assert_close_for

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_setting_by_device():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert [use_static_decoding(s, cpu) for s in ("on", "off", "auto")] == [True, False, False]
    assert [use_static_decoding(s, cuda) for s in ("on", "off")] == [True, False]
    assert Settings(static_decoding="on").static_decoding == "on"
    with pytest.raises(ValueError, match="static_decoding"):
        Settings(static_decoding="sometimes")


def test_static_runtime_translates_as_the_eager_one(tmp_path, tiny_spm):
    path = save_model_dir(tmp_path / "en-de", tiny_model(seed=2), tiny_spm, source_lang="en", target_lang="de")
    eager = TorchRuntime(load_model_dir(path), torch.device("cpu"))
    static = TorchRuntime(load_model_dir(path), torch.device("cpu"), static_decoding=True)
    assert eager.static is None and static.static is not None
    texts = ["Two dogs play in the snow.", "A man rides a bicycle down a long road.", "Hi."]
    options = DecodeOptions(beam_size=3, n_best=2, alignment="token", max_length_offset=4)
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
    static_generate = StaticGenerator.generate

    def counted(self, *args, **kwargs):
        calls.append(1)
        return static_generate(self, *args, **kwargs)

    monkeypatch.setattr(StaticGenerator, "generate", counted)

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
