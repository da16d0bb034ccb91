"""Verification criteria: exact match for full precision, corpus BLEU against eager float32 output
for quantised CTranslate2 exports; the manifest names the criterion and its threshold, the failing
cases are listed, and an injected threshold decides pass or fail."""
from __future__ import annotations

import json

import pytest

from model.model_dir import load_model_dir
from model.decoding.generate import generate, pad_sources
from export.cli import main
from export.errors import ExportError
from export.pipeline import ExportRequest, thresholds_for
from export.verify import BLEU_VS_EAGER, IDENTICAL_TOP, MIN_BLEU_QUANTISED, Thresholds, corpus_bleu, default_thresholds, verify
from tests.export.fixtures import model_dir, sentences


def test_corpus_bleu_by_hand():
    # 7 words, the last one wrong: n-gram precisions 6/7, 5/6, 4/5, 3/4, no brevity penalty,
    # BLEU = 100 * (6/7 * 5/6 * 4/5 * 3/4) ** (1/4) = 100 * (3/7) ** 0.25.
    assert corpus_bleu(["the cat sat on the mat today"], ["the cat sat on the mat now"]) == pytest.approx(100 * (3 / 7) ** 0.25, abs=1e-4)
    assert corpus_bleu(["", "a"], ["", "a"]) == 100.0  # identical output is 100 even where sacreBLEU has no n-grams


@pytest.mark.parametrize(
    "target, precision, expected",
    [
        ("onnx", "float32", Thresholds(IDENTICAL_TOP, 1.0, 1e-4)),
        ("torchscript", "float32", Thresholds(IDENTICAL_TOP, 1.0, 1e-4)),
        ("onnx", "float16", Thresholds(IDENTICAL_TOP, 0.99, 1e-2)),
        ("ct2", "float32", Thresholds(IDENTICAL_TOP, 0.99, 1e-3)),
        ("ct2", "int8", Thresholds(BLEU_VS_EAGER, 0.99, 1e-1, 85.0)),
        ("ct2", "int8_float16", Thresholds(BLEU_VS_EAGER, 0.99, 1e-1, 85.0)),
        ("ct2", "float16", Thresholds(BLEU_VS_EAGER, 0.99, 1e-2, 85.0)),
        ("onnx", "int8", Thresholds(BLEU_VS_EAGER, 0.99, 1e-1, 85.0)),
    ],
)
def test_default_criterion_by_target_and_precision(target, precision, expected):
    assert default_thresholds(target, precision) == expected
    assert MIN_BLEU_QUANTISED == 85.0


def test_overrides_that_the_criterion_does_not_read_are_refused(tmp_path):
    request = ExportRequest("ct2", tmp_path, tmp_path / "out", quantization="int8", min_match=0.5)
    with pytest.raises(ExportError) as error:
        thresholds_for(request)
    assert str(error.value) == ("--min-match does not apply: this export is verified by bleu-vs-eager "
                                "(choose the criterion with --criterion identical-top|bleu-vs-eager)")
    request = ExportRequest("ct2", tmp_path, tmp_path / "out", quantization="int8", criterion=IDENTICAL_TOP, min_match=0.5)
    assert thresholds_for(request) == Thresholds(IDENTICAL_TOP, 0.5, 1e-1)
    request = ExportRequest("onnx", tmp_path, tmp_path / "out", criterion=BLEU_VS_EAGER, min_bleu=99.5)
    assert thresholds_for(request) == Thresholds(BLEU_VS_EAGER, 1.0, 1e-4, 99.5)


class _OneChanged:
    """A runner whose output is eager's except sentence 1, which loses its last piece."""

    has_attention = True

    def __init__(self, loaded):
        self.loaded = loaded

    def generate(self, sources, options):
        src = pad_sources([s + [self.loaded.config.eos_id] for s in sources], self.loaded.config.pad_id)
        found = generate(self.loaded.model, src, options)
        assert found[1][0].tokens
        found[1][0].tokens = self.changed = found[1][0].tokens[:-1]
        return found


def test_bleu_criterion_passes_and_fails_by_the_injected_threshold(tmp_path_factory, tiny_spm):
    loaded = load_model_dir(model_dir(tmp_path_factory, tiny_spm))
    texts = sentences(6)
    runner = _OneChanged(loaded)
    first = verify(loaded, runner, texts, Thresholds(BLEU_VS_EAGER, min_bleu=0.0), beam_size=2)
    bleu = first["bleu_vs_eager"]
    assert 0.0 < bleu < 100.0
    assert (first["passed"], first["criterion"], first["min_bleu"]) == (True, BLEU_VS_EAGER, 0.0)
    assert "min_match" not in first and "score_tolerance" not in first
    assert (first["identical_top"], first["failure_count"]) == (5, 1)
    failure = first["failures"][0]
    assert (failure["index"], failure["reason"], failure["source"]) == (1, "different top hypothesis", texts[1])
    assert failure["exported"] == loaded.tokenizer.decode(runner.changed)
    assert verify(loaded, runner, texts, Thresholds(BLEU_VS_EAGER, min_bleu=bleu), beam_size=2)["passed"] is True
    assert verify(loaded, runner, texts, Thresholds(BLEU_VS_EAGER, min_bleu=bleu + 0.01), beam_size=2)["passed"] is False
    # The same outputs judged by identical tops fail at 100 % and pass at 5/6.
    assert verify(loaded, runner, texts, Thresholds(IDENTICAL_TOP, 1.0, 1e-4), beam_size=2)["passed"] is False
    assert verify(loaded, runner, texts, Thresholds(IDENTICAL_TOP, 5 / 6, 1e-4), beam_size=2)["passed"] is True


def test_cli_int8_is_verified_by_bleu_with_references(tmp_path, tmp_path_factory, tiny_spm, capsys):
    source = str(model_dir(tmp_path_factory, tiny_spm))
    out = tmp_path / "int8"
    argv = ["ct2", source, str(out), "--quantization", "int8", "--verify-sentences", "8", "--beam-size", "2"]
    assert main(argv + ["--min-bleu", "0"]) == 0
    stdout = capsys.readouterr().out
    assert stdout.startswith("verification PASSED by BLEU against eager float32: ")
    verification = json.loads((out / "manifest.json").read_text())["verification"]
    assert (verification["criterion"], verification["min_bleu"], verification["sentences"]) == (BLEU_VS_EAGER, 0.0, 8)
    references = verification["bleu_vs_references"]
    assert references["file"] == "data/multi30k/test_2016_flickr.de.gz"
    assert references["delta"] == pytest.approx(references["exported"] - references["eager"], abs=1e-3)
    assert f"(need >= 0); {verification['identical_top']}/8 identical top hypotheses" in stdout
    # 100 only passes when every sentence is identical: the tiny untrained model's int8 output is not.
    assert verification["identical_top"] < 8
    assert main(argv + ["--min-bleu", "100", "--force"]) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("verification FAILED by BLEU against eager float32: ")
    assert "different top hypothesis" in captured.out
    assert captured.err.endswith(f"phrasal-export: error: {out} failed verification; runtimes will refuse it\n")
