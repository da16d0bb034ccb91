"""Alignment methods per request ("alignment_method"): shift-att rows by hand, bidirectional
symmetrisation on a constructed case, and through the service: each method's links are the ones that
method gives, the server default applies when a request names none, and a method the served model
cannot give is a 422 naming the field and listing what it can."""
from __future__ import annotations

import json

import pytest
import torch

from model.alignments.word_alignment import TokenAlignment, Word, token_alignment
from model.model_dir import save_model_dir
from model.decoding.beam_search import Hypothesis
from model.alignments.bidirectional import agreement_matrix, bidirectional_alignment
from model.decoding.generate import generate
from model.decoding.options import METHOD_ROWS, DecodingOptions
from service.app import create_app
from service.runtime.text_codec import alignment_rows
from service.runtime.torch_runtime import TorchRuntime
from service.settings import Settings
from tests.helpers import tiny_model
from tests.service.support import serving

pytestmark = pytest.mark.usefixtures("one_thread")


def _close(rows, expected):
    return torch.allclose(torch.tensor(rows), torch.tensor(expected))


# -- rows by hand -------------------------------------------------------------------------------
def _hypothesis() -> Hypothesis:
    # Two tokens; rows are steps: step 0 predicts token 0 (reads BOS), step 1 predicts token 1
    # (reads token 0), the EOS step reads token 1. Columns: 2 source pieces + EOS.
    attention = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1]])
    final = torch.tensor([0.6, 0.3, 0.1])
    return Hypothesis([5, 6], -1.0, -3.0, attention, final)


def test_attention_rows_are_the_steps_that_predict_each_token():
    assert _close(alignment_rows(_hypothesis(), METHOD_ROWS["attention"], 2), [[0.7, 0.2], [0.1, 0.8]])


def test_shift_rows_are_the_steps_that_read_each_token():
    # token 0 is read by step 1, token 1 by the EOS step.
    assert _close(alignment_rows(_hypothesis(), METHOD_ROWS["shift"], 2), [[0.1, 0.8], [0.6, 0.3]])


def test_supervised_rows_skip_the_step_that_read_bos():
    hypothesis = _hypothesis()
    hypothesis.supervised_attention = torch.tensor([[0.5, 0.5, 0.0], [0.9, 0.1, 0.0], [0.2, 0.8, 0.0]])
    assert _close(alignment_rows(hypothesis, METHOD_ROWS["supervised"], 2), [[0.9, 0.1], [0.2, 0.8]])


# -- bidirectional symmetrisation -----------------------------------------------------------------
def _words(*spans):
    return [Word("w", a, b) for a, b in spans]


def test_bidirectional_alignment_combines_both_directions_weights_per_link():
    src, tgt = _words((0, 1), (2, 3), (4, 5)), _words((0, 1), (2, 3), (4, 5))
    # forward: per target word j its p(i | j); reverse (its source = our target): per source word i its p(j | i).
    forward = TokenAlignment(src, tgt, [[(0, 0.8), (1, 0.2)], [(2, 0.55), (1, 0.45)], [(2, 1.0)]],
                             [(0, 0), (2, 1), (2, 2)], "")
    reverse = TokenAlignment(tgt, src, [[(0, 0.9), (1, 0.1)], [(1, 0.9), (0, 0.1)], [(2, 0.95), (1, 0.05)]],
                             [], "")
    # √(p(i|j)·p(j|i)) by target word: j0 [√.72, √.02, 0], j1 [0, √.405, √.0275], j2 [0, 0, √.95]. Forward alone
    # links target 1 to source 2; the reverse model's confidence in source 1 -> target 1 wins the combination.
    combined = agreement_matrix(forward.links, reverse.links, 3, 3)
    expected = [[0.72 ** 0.5, 0.02 ** 0.5, 0.0], [0.0, 0.405 ** 0.5, 0.0275 ** 0.5], [0.0, 0.0, 0.95 ** 0.5]]
    assert [row == pytest.approx(want) for row, want in zip(combined, expected)] == [True, True, True]
    result = bidirectional_alignment(forward, reverse)
    assert result.pharaoh == "0-0 1-1 2-2"
    assert result.hard == [(0, 0), (1, 1), (2, 2)]
    # Each target word's weights: its row normalised, 6/7 and 1/7 for "√.72 : √.02".
    assert result.links[0] == [(0, pytest.approx(6 / 7)), (1, pytest.approx(1 / 7))]
    assert result.links[1] == [(1, pytest.approx(405 ** 0.5 / (405 ** 0.5 + 27.5 ** 0.5))),
                               (2, pytest.approx(27.5 ** 0.5 / (405 ** 0.5 + 27.5 ** 0.5)))]
    assert result.links[2] == [(2, 1.0)]
    # The agreement threshold: p(i|j)·p(j|i) of the combined matrix is .849 for 0-0, .521 for 1-1, .833 for 2-2.
    assert bidirectional_alignment(forward, reverse, threshold=0.6).pharaoh == "0-0 2-2"
    # A reverse model that links nothing to a word: that word has no link at all.
    silent = TokenAlignment(tgt, src, [[(0, 1.0)], [], [(2, 1.0)]], [], "")
    assert bidirectional_alignment(forward, silent).links == [[(0, 1.0)], [], [(2, 1.0)]]
    assert bidirectional_alignment(forward, silent).pharaoh == "0-0 2-2"


def test_bidirectional_alignment_refuses_texts_split_differently():
    one = TokenAlignment(_words((0, 1)), _words((0, 3)), [[(0, 1.0)]], [(0, 0)], "0-0")
    other = TokenAlignment(_words((0, 1), (2, 3)), _words((0, 1)), [[(0, 1.0)], [(0, 1.0)]], [(0, 0), (0, 1)], "")
    with pytest.raises(ValueError, match="split the target text into different words"):
        bidirectional_alignment(one, other)


# -- through the service --------------------------------------------------------------------------
HEAD = {"layer": 0, "head": "added", "weight": 1.0}
SOURCE = "Two dogs play in the snow."


def _randomised(model, scale=3.0):
    # The added head starts near uniform; random weights make its links differ from the attention's.
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.startswith("supervised_alignment."):
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * scale)
    return model


@pytest.fixture
def head_dir(tmp_path, tiny_spm):
    return save_model_dir(tmp_path / "en-de", _randomised(tiny_model(supervised_alignment=HEAD)), tiny_spm,
                          source_lang="en", target_lang="de")


def _expected(path, method):
    from model.model_dir import load_model_dir

    runtime = TorchRuntime(load_model_dir(path), torch.device("cpu"))
    options = DecodingOptions(beam_size=2, alignment="token", alignment_method=method, max_length_offset=4)
    ids, pieces, spans = runtime.tokenizer.encode_with_offsets(SOURCE)
    src = torch.tensor([[*ids, runtime.tokenizer.eos_id]])
    best = generate(runtime.model, src, options)[0][0]
    text, target_pieces, target_spans = runtime.tokenizer.decode_with_offsets(best.tokens)
    return token_alignment(source_text=SOURCE, source_pieces=pieces, source_spans=spans, target_text=text,
                           target_pieces=target_pieces, target_spans=target_spans,
                           attention=alignment_rows(best, METHOD_ROWS[method], len(pieces)),
                           symmetric=method == "supervised").pharaoh


def _ask(client, **extra):
    body = {"text": SOURCE, "source": "en", "target": "de", "beam_size": 2, "alignment": "token", **extra}
    return client.post("/translate", json=body)


def test_each_method_returns_its_own_links_and_auto_is_the_supervised_head(head_dir):
    expected = {method: _expected(head_dir, method) for method in ("attention", "shift", "supervised")}
    assert len(set(expected.values())) == 3  # the methods disagree on this model, so the test can tell them apart
    settings = Settings(model_dirs=[head_dir], device="cpu", max_length_offset=4, inference_process=False)
    with serving(create_app(settings)) as client:
        for method, pharaoh in expected.items():
            response = _ask(client, alignment_method=method)
            assert response.status_code == 200, response.text
            assert response.json()["translations"][0][0]["alignment"]["pharaoh"] == pharaoh
        assert _ask(client).json()["translations"][0][0]["alignment"]["pharaoh"] == expected["supervised"]


FULL_HEAD = {"layer": 0, "head": "added", "weight": 1.0, "heads": 2, "self_attention": True, "diagonal": True,
             "link_threshold": 0.05}


def test_a_head_that_reads_the_whole_target_serves_the_forced_pass_links(tmp_path, tiny_spm):
    from model.model_dir import load_model_dir

    path = save_model_dir(tmp_path / "en-de", _randomised(tiny_model(supervised_alignment=FULL_HEAD)), tiny_spm,
                          source_lang="en", target_lang="de")
    runtime = TorchRuntime(load_model_dir(path), torch.device("cpu"))
    options = DecodingOptions(beam_size=2, alignment="token", alignment_method="supervised", max_length_offset=4)
    ids, pieces, spans = runtime.tokenizer.encode_with_offsets(SOURCE)
    src = torch.tensor([[*ids, runtime.tokenizer.eos_id]])
    best = generate(runtime.model, src, DecodingOptions(beam_size=2, max_length_offset=4))[0][0]
    # The rows by hand: the finished hypothesis forced through the model; row k + 1 reads token k.
    with torch.no_grad():
        rows = runtime.model(src, torch.tensor([[1, *best.tokens]])).supervised_attention[0, 1:, : len(pieces)]
    text, target_pieces, target_spans = runtime.tokenizer.decode_with_offsets(best.tokens)
    expected = token_alignment(source_text=SOURCE, source_pieces=pieces, source_spans=spans, target_text=text,
                               target_pieces=target_pieces, target_spans=target_spans, attention=rows,
                               symmetric=True, link_threshold=0.05).pharaoh
    assert expected != token_alignment(source_text=SOURCE, source_pieces=pieces, source_spans=spans,
                                       target_text=text, target_pieces=target_pieces, target_spans=target_spans,
                                       attention=rows, symmetric=True).pharaoh  # the threshold matters here
    settings = Settings(model_dirs=[path], device="cpu", max_length_offset=4, inference_process=False)
    with serving(create_app(settings)) as client:
        response = _ask(client)
        assert response.status_code == 200, response.text
        assert response.json()["translations"][0][0]["alignment"]["pharaoh"] == expected
        assert runtime.translate([SOURCE], options)[0][0].alignment.pharaoh == expected


def test_the_server_setting_is_the_default_method(head_dir):
    settings = Settings(model_dirs=[head_dir], device="cpu", max_length_offset=4, inference_process=False,
                        alignment_method="shift")
    with serving(create_app(settings)) as client:
        assert _ask(client).json()["translations"][0][0]["alignment"]["pharaoh"] == _expected(head_dir, "shift")


def test_a_method_the_model_lacks_is_a_422_naming_the_field(tmp_path, tiny_spm):
    path = save_model_dir(tmp_path / "en-de", tiny_model(), tiny_spm, source_lang="en", target_lang="de")
    settings = Settings(model_dirs=[path], device="cpu", max_length_offset=4, inference_process=False)
    with serving(create_app(settings)) as client:
        response = _ask(client, alignment_method="supervised")
        assert response.status_code == 422
        reason = "'supervised' is not offered by the torch model serving en-de; it offers: attention, shift"
        assert response.json()["detail"] == [{"field": "alignment_method", "loc": ["body", "alignment_method"],
                                              "msg": reason, "type": "unsupported_option"}]
        response = _ask(client, alignment_method="bidirectional")
        assert response.status_code == 422
        reason = "'bidirectional' needs the reverse pair de-en served (served: en-de); en-de offers: attention, shift"
        assert response.json()["detail"][0]["msg"] == reason
        # Without an alignment the method is not used, so nothing is refused.
        assert _ask(client, alignment="none", alignment_method="supervised").status_code == 200


def test_bidirectional_symmetrises_with_the_reverse_model(tmp_path, tiny_spm, head_dir):
    from model.model_dir import load_model_dir

    reverse_dir = save_model_dir(tmp_path / "de-en", tiny_model(seed=5), tiny_spm, source_lang="de", target_lang="en")
    settings = Settings(model_dirs=[head_dir, reverse_dir], device="cpu", max_length_offset=4,
                        inference_process=False)
    with serving(create_app(settings)) as client:
        forward = _ask(client, alignment_method="supervised").json()["translations"][0][0]
        both = _ask(client, alignment_method="bidirectional").json()["translations"][0][0]
        # The reverse model has no supervised head, so "auto" stays with the forward head.
        assert _ask(client).json()["translations"][0][0] == forward
    assert both["text"] == forward["text"]
    forward_runtime = TorchRuntime(load_model_dir(head_dir), torch.device("cpu"))
    reverse_runtime = TorchRuntime(load_model_dir(reverse_dir), torch.device("cpu"))
    options = DecodingOptions(beam_size=2, alignment="token", alignment_method="supervised", max_length_offset=4)
    mine = forward_runtime.translate([SOURCE], options)[0][0].alignment
    theirs = reverse_runtime.force_align([(forward["text"], SOURCE)], "attention")[0]
    assert both["alignment"]["pharaoh"] == bidirectional_alignment(mine, theirs).pharaoh


def test_auto_is_bidirectional_when_both_directions_have_a_head(tmp_path, tiny_spm):
    # Milder random heads than head_dir's, whose links here fall on pieces of no word.
    forward_dir, reverse_dir = (
        save_model_dir(tmp_path / pair, _randomised(tiny_model(seed=seed, supervised_alignment=HEAD), scale=1.0),
                       tiny_spm, source_lang=pair[:2], target_lang=pair[3:])
        for pair, seed in (("en-de", 0), ("de-en", 5)))
    settings = Settings(model_dirs=[forward_dir, reverse_dir], device="cpu", max_length_offset=4,
                        inference_process=False)
    with serving(create_app(settings)) as client:
        forward = _ask(client, alignment_method="supervised").json()["translations"][0][0]
        both = _ask(client, alignment_method="bidirectional").json()["translations"][0][0]
        assert both["alignment"] != forward["alignment"]  # the two methods differ here, so the test can tell
        assert _ask(client).json()["translations"][0][0] == both
    settings = Settings(model_dirs=[forward_dir, reverse_dir], device="cpu", max_length_offset=4,
                        inference_process=False, alignment_method="supervised")
    with serving(create_app(settings)) as client:
        assert _ask(client).json()["translations"][0][0] == forward  # a server setting other than auto wins


def test_auto_pairs_a_model_only_with_a_reverse_model_of_its_own_domain(tmp_path, tiny_spm):
    def head_model(name, seed, domain):
        path = save_model_dir(tmp_path / name, _randomised(tiny_model(seed=seed, supervised_alignment=HEAD), scale=1.0),
                              tiny_spm, source_lang=name[:2], target_lang=name[3:5])
        if domain is not None:
            (path / "model_card.json").write_text(json.dumps({"domain": domain}))
        return path

    software, captions = head_model("en-de-software", 0, "software"), head_model("de-en", 5, None)
    settings = Settings(model_dirs=[software, captions], device="cpu", max_length_offset=4, inference_process=False)
    with serving(create_app(settings)) as client:
        forward = _ask(client, alignment_method="supervised").json()["translations"][0][0]
        with_captions = _ask(client, alignment_method="bidirectional").json()["translations"][0][0]
        assert with_captions["alignment"] != forward["alignment"]  # so the test can tell them apart
        # The only De->En model is of another domain: asked for, it serves; by default, it is not used.
        assert _ask(client).json()["translations"][0][0] == forward
    reverse = head_model("de-en-software", 7, "software")
    settings = Settings(model_dirs=[software, captions, reverse], device="cpu", max_length_offset=4,
                        inference_process=False)
    with serving(create_app(settings)) as client:
        both = _ask(client, alignment_method="bidirectional").json()["translations"][0][0]
        assert both["alignment"] != with_captions["alignment"]  # the software reverse model, not the pair's default
        assert _ask(client).json()["translations"][0][0] == both


def test_the_inference_process_offers_the_same_methods(head_dir):
    settings = Settings(model_dirs=[head_dir], device="cpu", max_length_offset=4, inference_process=True)
    with serving(create_app(settings)) as client:
        response = _ask(client)
        assert response.json()["translations"][0][0]["alignment"]["pharaoh"] == _expected(head_dir, "supervised")
        refused = _ask(client, alignment_method="bidirectional")
        assert refused.status_code == 422
        assert refused.json()["detail"][0]["msg"] == ("'bidirectional' needs the reverse pair de-en served (served: "
                                                      "en-de); en-de offers: attention, shift, supervised")
