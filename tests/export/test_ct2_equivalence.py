"""CTranslate2 export: its own search reproduces ours (tokens, normalised scores, attention) on
the vanilla Transformer, and converting never touches the model it reads."""
from __future__ import annotations

import pytest
import torch

from model.model_dir import load_model_dir
from model.decoding.generate import generate, pad_sources
from model.decoding.options import DecodingOptions
from export.ct2_target import build_ct2
from export.runners import open_runner
from tests.export.fixtures import exported, model_dir, sentences


@pytest.mark.parametrize("length_penalty", [1.0, 0.0])
def test_ct2_float32_top_hypotheses_equal_eager(length_penalty, tmp_path_factory, tiny_spm):
    loaded = load_model_dir(model_dir(tmp_path_factory, tiny_spm))
    runner = open_runner(exported(tmp_path_factory, tiny_spm, "ct2", quantization="float32"))
    ids = loaded.tokenizer.encode_batch(sentences(12))
    options = DecodingOptions(beam_size=4, n_best=1, length_penalty=length_penalty, alignment="phrase",
                            return_phrase_attention=True)
    eager = generate(loaded.model, pad_sources([s + [loaded.config.eos_id] for s in ids], loaded.config.pad_id), options)
    got = runner.generate(ids, options)
    # At the length limit the searches differ by design (ours forces EOS, CTranslate2 keeps its
    # best candidates: export/ct2_runner.py), so compare the sentences that end before it.
    ended = [i for i, (nbest, source) in enumerate(zip(eager, ids)) if len(nbest[0].tokens) < runner.limit(len(source), options)]
    assert len(ended) >= 8
    assert [got[i][0].tokens for i in ended] == [eager[i][0].tokens for i in ended]
    for i in ended:
        (a,), (b,), source = got[i], eager[i], ids[i]
        assert a.score == pytest.approx(b.score, abs=1e-3)  # verify.py's ct2 float32 tolerance
        # CTranslate2 drops the EOS column itself: (target pieces, source pieces).
        assert a.attention.shape == (len(a.tokens), len(source))
        assert torch.allclose(a.attention, b.attention[:, : len(source)], atol=1e-4)
        # Vanilla's phrase table is its token attention as 1-grams (T, 1, S), eager's included.
        assert torch.allclose(a.phrase_attention, b.phrase_attention[:, :, : len(source)], atol=1e-4)
        assert torch.equal(a.phrase_attention, a.attention.unsqueeze(1))


def test_int8_conversion_leaves_the_eager_model_untouched(tmp_path, tmp_path_factory, tiny_spm):
    # CTranslate2 quantises its arrays in place; they must not share memory with the model.
    loaded = load_model_dir(model_dir(tmp_path_factory, tiny_spm))
    before = {name: t.clone() for name, t in loaded.model.state_dict().items()}
    build_ct2(loaded.model, loaded.tokenizer, tmp_path, "int8")
    assert all(torch.equal(before[name], t) for name, t in loaded.model.state_dict().items())


def test_ct2_refuses_the_gnmt_length_penalty(tmp_path_factory, tiny_spm):
    # CTranslate2 only normalises by |y|^α: asked for ((5+|y|)/6)^α it must refuse, never rank with the other formula.
    runner = open_runner(exported(tmp_path_factory, tiny_spm, "ct2", quantization="float32"))
    options = DecodingOptions(beam_size=2, n_best=1, length_penalty=0.6, length_penalty_form="gnmt")
    with pytest.raises(ValueError, match=r"^length_penalty_form 'gnmt' is not offered by CTranslate2, whose beam search "
                                         r"only normalises by \|y\|\^length_penalty \(length_penalty_form 'power'\)$"):
        runner.generate([[5, 6]], options)


def test_the_one_entry_point_runs_ctranslate2_with_cancellation(tmp_path_factory, tiny_spm):
    from model.decoding.generate import SearchCancelled

    loaded = load_model_dir(model_dir(tmp_path_factory, tiny_spm))
    runner = open_runner(exported(tmp_path_factory, tiny_spm, "ct2", quantization="float32"))
    ids = loaded.tokenizer.encode_batch(sentences(6))
    src = pad_sources([s + [loaded.config.eos_id] for s in ids], loaded.config.pad_id)
    options = DecodingOptions(beam_size=3, n_best=2)
    by_entry = generate(runner, src, options)
    by_ids = runner.generate(ids, options)
    assert [[(h.tokens, h.score) for h in n] for n in by_entry] == [[(h.tokens, h.score) for h in n] for n in by_ids]
    with pytest.raises(SearchCancelled):  # a beam search: asked before its one call
        generate(runner, src, options, should_stop=lambda: True)
    asked = []

    def third_step() -> bool:
        asked.append(1)
        return len(asked) >= 3

    with pytest.raises(SearchCancelled):  # greedy: asked at every step through CTranslate2's callback
        generate(runner, src, DecodingOptions(beam_size=1, max_length_offset=50), should_stop=third_step)
    assert len(asked) >= 3
