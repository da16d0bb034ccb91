"""Check support lists every reason a model cannot be exported (exit code 2), and the CLI turns
bad input into one readable line with exit code 2, a failed verification into exit code 1."""
from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from model.model_dir import save_model_dir
from model.attention import registry
from model.attention.registry import known_attention_kinds
from model.attention.vanilla import VanillaAttention
from model.config import AttentionConfig
from export.cli import main
from export.errors import UnsupportedModel
from export.runners import open_runner
from export.support import check_support, ct2_problems
from model.errors import ArtifactError
from tests.export.fixtures import MODEL_CONFIGS, PHRASAL_CONFIGS, exported, model_dir
from tests.helpers import tiny_config, tiny_model


class _Unexportable(VanillaAttention):
    """Says through the registry hook that it has no kernel on any target."""

    @staticmethod
    def export_problems(target, options, site):
        return [f"no {target} kernel in this test kind"]


class _NotBatchFirst(VanillaAttention):
    """Keeps a step counter of shape (1,) in its state: not batch-first, so not reorderable."""

    def init_state(self, memory, batch_size, device, dtype):
        state = super().init_state(memory, batch_size, device, dtype)
        return {**state, "steps": torch.zeros(1, device=device)}

    def step(self, x, state, **kwargs):
        out = super().step(x, {k: v for k, v in state.items() if k != "steps"}, **kwargs)
        return dataclasses.replace(out, state={**out.state, "steps": state["steps"] + 1})


@pytest.fixture
def test_kinds(monkeypatch):
    """The two kinds, registered for one test only (other tests read the registry's exact list)."""
    known_attention_kinds()  # load the built-in kinds first
    monkeypatch.setitem(registry._REGISTRY, "test_unexportable", _Unexportable)
    monkeypatch.setitem(registry._REGISTRY, "test_not_batch_first", _NotBatchFirst)

UNSUPPORTED = dict(encoder_self_attention=AttentionConfig("test_unexportable"),
                   decoder_self_attention=AttentionConfig("test_not_batch_first"))
NOT_BATCH_FIRST = ("decoder state tensor 'layers.{}.self.steps' is not batch-first (dimension 0 sizes "
                   "(1, 1, 1, 1, 1) on probes of batch sizes (2, 2, 2, 3, 2))")
CT2_REASONS = [
    "encoder_self_attention (test_unexportable): no ct2 kernel in this test kind",
    "encoder_self_attention is 'test_unexportable': CTranslate2's TransformerSpec has only vanilla "
    "multi-head attention (export this model to onnx or torchscript instead)",
    "decoder_self_attention is 'test_not_batch_first': CTranslate2's TransformerSpec has only vanilla "
    "multi-head attention (export this model to onnx or torchscript instead)",
]


def test_graph_targets_list_the_registry_reasons_and_the_state_problems(test_kinds):
    layout, reasons = check_support(tiny_model(**UNSUPPORTED), "onnx")
    assert layout is None
    assert reasons == [
        "encoder_self_attention (test_unexportable): no onnx kernel in this test kind",
        NOT_BATCH_FIRST.format(0),
        NOT_BATCH_FIRST.format(1),
    ]


def test_ct2_refuses_every_non_vanilla_site(test_kinds):
    assert check_support(tiny_model(**UNSUPPORTED), "ct2") == (None, CT2_REASONS)
    assert check_support(tiny_model(), "ct2") == (None, [])


def _ct2_refusal(site: str, kind: str) -> str:
    return (f"{site}_attention is {kind!r}: CTranslate2's TransformerSpec has only vanilla multi-head attention "
            "(export this model to onnx or torchscript instead)")


@pytest.mark.parametrize("config_id", PHRASAL_CONFIGS)
def test_ct2_refuses_every_phrasal_config_naming_each_site(config_id):
    kind = config_id.split("-")[0]
    config = tiny_config(**MODEL_CONFIGS[config_id])
    assert ct2_problems(config) == [_ct2_refusal(site, kind) for site in ("encoder_self", "decoder_self", "cross")]


def test_ct2_refuses_any_other_model_part_it_cannot_represent():
    # Generic over ModelConfig: a field outside the ones CTranslate2 represents, set away from
    # its default, is refused by name (set without validation: the rule must not need the part's code).
    config = tiny_config(dropout=0.3, global_fertility={"weight": 0.1})  # training-only: still exportable
    assert ct2_problems(config) == []
    object.__setattr__(config, "phrase_representation", {"glance": "max"})
    object.__setattr__(config, "alignment_biases", {"markov": {"window": 1}})
    assert ct2_problems(config) == [
        "phrase_representation is set ({'glance': 'max'}): CTranslate2's TransformerSpec has no such part "
        "(export this model to onnx or torchscript instead)",
        "alignment_biases is set ({'markov': {'window': 1}}): CTranslate2's TransformerSpec has no such part "
        "(export this model to onnx or torchscript instead)",
    ]


def test_cli_refuses_a_phrasal_model_for_ct2_with_exit_2(tmp_path, tmp_path_factory, tiny_spm, capsys):
    source = model_dir(tmp_path_factory, tiny_spm, "queryk-interleaved")
    assert main(["ct2", str(source), str(tmp_path / "out")]) == 2
    reasons = [_ct2_refusal(site, "queryk") for site in ("encoder_self", "decoder_self", "cross")]
    assert capsys.readouterr().err == f"phrasal-export: error: cannot export to ct2: {'; '.join(reasons)}\n"
    assert not (tmp_path / "out").exists()


def test_cli_refuses_an_unsupported_model_with_every_reason_and_exit_2(test_kinds, tmp_path, tiny_spm, capsys):
    source = save_model_dir(tmp_path / "model", tiny_model(**UNSUPPORTED), tiny_spm, source_lang="en", target_lang="de")
    assert main(["ct2", str(source), str(tmp_path / "out"), "--no-verify"]) == 2
    err = capsys.readouterr().err
    assert err == f"phrasal-export: error: {UnsupportedModel('ct2', CT2_REASONS)}\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["onnx", "{missing}", "{out}"], "model directory {missing} does not exist"),
        (["tflite", "{model}", "{out}"], "argument {{onnx,torchscript,ct2}}: invalid choice: 'tflite' (choose from 'onnx', 'torchscript', 'ct2')"),
        (["onnx", "{model}", "{out}", "--verify-sentences", "0"], "argument --verify-sentences: expected a positive integer, got '0'"),
        (["ct2", "{model}", "{out}", "--min-match", "2"], "argument --min-match: expected a number in [0, 1], got '2'"),
        (["onnx", "{model}", "{out}", "--score-tolerance", "nan"], "argument --score-tolerance: expected a number >= 0, got 'nan'"),
        (["ct2", "{model}", "{out}", "--min-bleu", "101"], "argument --min-bleu: expected a BLEU score in [0, 100], got '101'"),
        (["ct2", "{model}", "{out}", "--criterion", "exact"],
         "argument --criterion: invalid choice: 'exact' (choose from 'identical-top', 'bleu-vs-eager')"),
        (["onnx", "{model}", "{out}", "--min-bleu", "90"],
         "--min-bleu does not apply: this export is verified by identical-top (choose the criterion with --criterion identical-top|bleu-vs-eager)"),
        (["onnx", "{model}", "{out}", "--quantization", "int8"], "unrecognized arguments: --quantization int8"),
        (["torchscript", "{model}", "{out}", "--dtype", "int8"],
         "argument --dtype: invalid choice: 'int8' (choose from 'float16', 'float32')"),
        (["onnx", "{model}", "{out}", "--verify-data", "{missing}"],
         "verification data {missing}/test_2016_flickr.en.gz not found; pass --verify-data DIR / --verify-split NAME, or --no-verify"),
        (["onnx", "{model}", "{model}/inside", "--no-verify"], "OUT_DIR {model}/inside must lie outside MODEL_DIR {model}"),
        (["onnx", "{model}", "{full}", "--no-verify"], "OUT_DIR {full} exists and is not empty; pass --force to replace it"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(args, message, tmp_path, tmp_path_factory, tiny_spm, capsys):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    paths = {"model": model_dir(tmp_path_factory, tiny_spm), "out": tmp_path / "out",
             "missing": tmp_path / "missing", "full": tmp_path / "full"}
    argv = [a.format(**paths) for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"phrasal-export: error: {message.format(**paths)}\n"
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"


def test_cli_exports_verifies_and_records_the_result(tmp_path, tmp_path_factory, tiny_spm, capsys):
    out = tmp_path / "ts"
    assert main(["torchscript", str(model_dir(tmp_path_factory, tiny_spm)), str(out), "--verify-sentences", "6", "--beam-size", "2"]) == 0
    stdout = capsys.readouterr().out
    assert stdout.startswith("verification PASSED against eager float32: 6/6 identical top hypotheses (100.00%, need 100%), max |score diff| ")
    verification = json.loads((out / "manifest.json").read_text())["verification"]
    assert (verification["passed"], verification["sentences"], verification["identical_top"]) == (True, 6, 6)
    assert (verification["reference"], verification["against_eager_float32"]) == ("eager float32", None)
    assert (verification["beam_size"], verification["min_match"], verification["score_tolerance"]) == (2, 1.0, 1e-4)
    assert (verification["criterion"], verification["bleu_vs_eager"]) == ("identical-top", 100.0)
    assert verification["source"] == "data/multi30k/test_2016_flickr.en.gz"
    assert open_runner(out).exported.manifest["verification"] == verification


def test_float16_graphs_are_verified_against_the_eager_float16_model(tmp_path, tmp_path_factory, tiny_spm, capsys):
    # TorchScript float16 runs the very kernels of the eager half-precision copy it was traced
    # from: identical hypotheses and scores. What float16 costs against float32 is information.
    out = tmp_path / "ts16"
    argv = ["torchscript", str(model_dir(tmp_path_factory, tiny_spm)), str(out), "--dtype", "float16",
            "--verify-sentences", "6", "--beam-size", "2", "--score-tolerance", "0"]
    assert main(argv) == 0
    stdout = capsys.readouterr().out
    assert stdout.startswith("verification PASSED against eager float16: 6/6 identical top hypotheses (100.00%, need 99%), "
                             "max |score diff| 0.00e+00 (tolerance 0e+00); against eager float32 (information): ")
    verification = json.loads((out / "manifest.json").read_text())["verification"]
    assert verification["reference"] == "eager float16"
    assert set(verification["against_eager_float32"]) == {"identical_top", "bleu"}
    float32 = verification["against_eager_float32"]
    # What float16 costs is information, not a pass mark: the manifest records what was printed.
    assert (
        f"against eager float32 (information): {float32['identical_top']}/6 identical, BLEU {float32['bleu']:.2f}"
        in stdout.splitlines()[0]
    )


def test_cli_failed_verification_prints_the_cases_exits_1_and_the_export_is_refused(tmp_path, tmp_path_factory, tiny_spm, capsys):
    # ONNX Runtime's CPU float16 graph computes some ops in float32 (no float16 kernel): its
    # scores are not bitwise those of eager float16, so a zero tolerance fails.
    out = tmp_path / "onnx16"
    argv = ["onnx", str(model_dir(tmp_path_factory, tiny_spm)), str(out), "--dtype", "float16",
            "--verify-sentences", "4", "--beam-size", "2", "--score-tolerance", "0"]
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith("verification FAILED against eager float16: ")
    assert "  #0 " in captured.out and "      eager    (" in captured.out and "      exported (" in captured.out
    assert captured.err.endswith(f"phrasal-export: error: {out} failed verification; runtimes will refuse it\n")
    with pytest.raises(ArtifactError, match="failed its verification"):
        open_runner(out)


def test_torchscript_export_loads_without_the_project(tmp_path_factory, tiny_spm):
    # torch.jit.load needs no Python class of ours: the saved code is self-contained.
    path = exported(tmp_path_factory, tiny_spm, "torchscript")
    code = (
        "import sys, torch\n"
        "sys.modules['model'] = None; sys.modules['export'] = None  # importing either now fails\n"
        f"enc = torch.jit.load({str(path / 'encoder.pt')!r})\n"
        "state = enc(torch.tensor([[5, 6, 2]]))\n"
        "print(len(state), tuple(state[2].shape))\n"  # state[0]: position, state[1]: memory_pad_mask
    )
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd="/")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "10 (1, 4, 0, 8)"


def test_an_exporter_failure_is_one_line_and_exit_1_and_traceback_shows_it(tmp_path, monkeypatch, capsys):
    import export.cli as cli

    def broken(request, log):
        raise RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : no kernel\nsecond line")

    monkeypatch.setattr(cli, "run_export", broken)
    argv = ["onnx", str(tmp_path / "model"), str(tmp_path / "out")]
    assert main(argv) == 1
    assert capsys.readouterr().err == (
        "phrasal-export: error: the onnx export failed: RuntimeError: [ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : "
        "no kernel (rerun with --traceback for details)\n"
    )
    with pytest.raises(RuntimeError, match="no kernel"):
        main([*argv, "--traceback"])


@pytest.mark.parametrize("existed", [False, True])
def test_an_export_that_fails_after_writing_leaves_out_dir_as_it_found_it(existed, tmp_path, tmp_path_factory, tiny_spm, monkeypatch, capsys):
    # The graphs are written before verification runs; a crash there used to leave them without
    # a manifest, so the next attempt was refused ("not empty; pass --force").
    import export.pipeline as pipeline

    def crash(*args, **kwargs):
        raise RuntimeError("index is on cpu, different from other tensors on cuda:0")

    monkeypatch.setattr(pipeline, "verify", crash)
    out = tmp_path / "ts"
    if existed:
        out.mkdir()
    argv = ["torchscript", str(model_dir(tmp_path_factory, tiny_spm)), str(out), "--verify-sentences", "2"]
    assert main(argv) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "phrasal-export: error: the torchscript export failed: RuntimeError: index is on cpu, different from other "
        "tensors on cuda:0 (rerun with --traceback for details)"
    )
    assert (out.exists(), list(out.iterdir()) if existed else None) == (existed, [] if existed else None)
    monkeypatch.undo()
    assert main(argv) == 0  # no --force needed


def test_probe_and_verification_inputs_are_made_on_the_model_device():
    # --device cuda exports failed on "index is on cpu": the probe batch and the verification
    # batches were made on the CPU whatever the model's device. The meta device stands in for
    # CUDA here: a tensor made on the CPU would say so.
    from export.layout import probe_source
    from export.verify import on_device_of

    model = tiny_model().to("meta")
    assert probe_source(model, 2, 5).device.type == "meta"
    assert on_device_of(model, torch.ones(2, 3, dtype=torch.long)).device.type == "meta"


def test_an_added_alignment_head_is_refused_with_its_reason_for_every_target():
    model = tiny_model(supervised_alignment={"layer": 0, "head": "added", "weight": 1.0})
    reason = ("supervised_alignment has an added head: the exported step graphs have no output for it; serve this "
              "model with the torch backend (an export of the same model without the head translates identically)")
    for target in ("onnx", "torchscript"):
        assert reason in check_support(model, target)[1]
    assert check_support(model, "ct2")[1][0] == reason


def test_ct2_refuses_contextual_source_embeddings_by_name():
    # +C changes the encoder's input; CTranslate2's TransformerSpec has no gate and would drop it silently.
    assert ct2_problems(tiny_config(contextual_source_embeddings=True)) == [
        "contextual_source_embeddings is set (True): CTranslate2's TransformerSpec has no such part "
        "(export this model to onnx or torchscript instead)"]
