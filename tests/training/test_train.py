"""End to end on the smoke recipe (bundled data, a few hundred pairs, CPU): the loss falls, a loadable
model dir comes out, a resumed run continues exactly where an uninterrupted one would be, and the
CLIs turn bad input into exit code 2 and one line."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from model.model_dir import load_model_dir
from training import checkpoints as ckpt
from training.cli import main as train_main
from training.evaluate import main as eval_main
from training.loop import train
from training.recipe import load_recipe
from model.decoding.generate import generate, source_batch
from model.decoding.options import DecodingOptions
from training.translate import translate_batch
from tests.training.support import read_log

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "recipes" / "smoke.json"


pytestmark = pytest.mark.usefixtures("one_thread")


def smoke(**changes):
    return load_recipe(SMOKE, [f"data_dir={REPO / 'data' / 'multi30k'}"]).replace(**changes)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("runs") / "smoke"
    result = train(smoke(), run_dir, device="cpu", progress=False)
    return run_dir, result


def test_smoke_training_lowers_the_loss(smoke_run):
    run_dir, result = smoke_run
    assert result.step == 30
    losses = [r["loss"] for r in read_log(run_dir, "train")]
    assert [r["step"] for r in read_log(run_dir, "train")] == [5, 10, 15, 20, 25, 30]
    assert losses[-1] < losses[0] - 1.0, losses
    valid = read_log(run_dir, "valid")
    assert [r["step"] for r in valid] == [15, 30]
    assert valid[-1]["loss"] < valid[0]["loss"]
    assert valid[-1]["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    # keep_last=3 numbered checkpoints; the model is the average of the last 2.
    assert [p.name for p in ckpt.list_checkpoints(run_dir / "checkpoints")] == [
        "checkpoint_0000010.pt", "checkpoint_0000020.pt", "checkpoint_0000030.pt"]
    assert read_log(run_dir, "export")[0]["steps"] == [20, 30]


def test_smoke_model_dir_loads_and_translates(smoke_run):
    run_dir, result = smoke_run
    assert result.model_dir == run_dir / "model"
    loaded = load_model_dir(result.model_dir)
    assert (loaded.source_lang, loaded.target_lang) == ("en", "de")
    assert loaded.manifest["training"]["steps"] == [20, 30]
    averaged = ckpt.average_checkpoints(ckpt.list_checkpoints(run_dir / "checkpoints")[-2:])
    for name, tensor in loaded.model.state_dict().items():
        assert torch.equal(tensor, averaged[name]), name
    texts = ["A man is riding a bike.", "Two dogs play in the snow."]
    hyps = translate_batch(loaded.model, loaded.tokenizer, texts, beam=2, batch_size=1)
    assert hyps == translate_batch(loaded.model, loaded.tokenizer, texts, beam=2, batch_size=8)
    # Each text's translation is its own best hypothesis, whatever order the batches ran in.
    options = DecodingOptions(beam_size=2, n_best=1)  # translate_batch's length limit: the defaults
    for text, hyp in zip(texts, hyps):
        (best,) = generate(loaded.model, source_batch(loaded.tokenizer, [text], torch.device("cpu")), options)
        assert hyp == loaded.tokenizer.decode(best[0].tokens)


def test_resume_continues_the_same_run(tmp_path):
    recipe = smoke(max_updates=20, val_interval=100, val_bleu_sentences=0, log_interval=5)
    whole = train(recipe, tmp_path / "whole", device="cpu", progress=False, export=False)
    train(recipe.replace(max_updates=10), tmp_path / "split", device="cpu", progress=False, export=False)
    resumed = train(recipe, tmp_path / "split", device="cpu", resume=True, progress=False, export=False)
    assert resumed.step == whole.step == 20
    assert read_log(tmp_path / "split", "resume")[0]["step"] == 10
    before = {r["step"]: r["loss"] for r in read_log(tmp_path / "whole", "train")}
    after = {r["step"]: r["loss"] for r in read_log(tmp_path / "split", "train")}
    assert after == before  # steps 15 and 20 came from the resumed process
    a = ckpt.load_checkpoint(tmp_path / "whole" / "checkpoints" / "checkpoint_0000020.pt")
    b = ckpt.load_checkpoint(tmp_path / "split" / "checkpoints" / "checkpoint_0000020.pt")
    for name in a["model"]:
        assert torch.equal(a["model"][name], b["model"][name]), name
    assert a["epoch"] == b["epoch"] and a["batch_in_epoch"] == b["batch_in_epoch"]


def test_average_subcommand_and_evaluate_cli(smoke_run, tmp_path, capsys):
    run_dir, _ = smoke_run
    out = tmp_path / "avg"
    assert train_main(["average", "--run", str(run_dir), "--last", "3", "--out", str(out), "--fp16"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["weights_dtype"] == "float16" and manifest["training"]["steps"] == [10, 20, 30]
    capsys.readouterr()
    src, ref = tmp_path / "src.en", tmp_path / "ref.de"
    src.write_text("A man is riding a bike.\nTwo dogs play in the snow.\n")
    ref.write_text("Ein Mann fährt Fahrrad.\nZwei Hunde spielen im Schnee.\n")
    assert eval_main(["--model-dir", str(out), "--src", str(src), "--ref", str(ref), "--beam", "2",
                      "--device", "cpu", "--json", "--out", str(tmp_path / "hyps.de")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sentences"] == 2
    assert report["bleu"]["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp")
    assert report["bleu_lowercase"]["signature"].startswith("nrefs:1|case:lc|eff:no|tok:13a")
    assert report["chrf"]["signature"].startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0")
    assert len((tmp_path / "hyps.de").read_text().splitlines()) == 2
    # The smoke recipe names no length penalty: the shared default |y|^1; the command line may ask for GNMT's.
    assert (report["length_penalty"], report["length_penalty_form"]) == (1.0, "power")
    assert eval_main(["--model-dir", str(out), "--src", str(src), "--beam", "2", "--device", "cpu", "--json",
                      "--length-penalty", "0.6", "--length-penalty-form", "gnmt"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["length_penalty"], report["length_penalty_form"]) == (0.6, "gnmt")


def test_evaluate_records_the_scores_in_the_model_card_the_service_reads(smoke_run, tmp_path, capsys):
    from model.model_card import read_card

    run_dir, result = smoke_run
    model_dir = tmp_path / "en-de-smoke"
    shutil.copytree(result.model_dir, model_dir)
    (model_dir / "model_card.json").write_text('{"domain": "captions"}')
    src, ref = tmp_path / "src.en", tmp_path / "ref.de"
    src.write_text("A man is riding a bike.\nTwo dogs play in the snow.\n")
    ref.write_text("Ein Mann fährt Fahrrad.\nZwei Hunde spielen im Schnee.\n")
    for name in ("first", "second"):
        assert eval_main(["--model-dir", str(model_dir), "--src", str(src), "--ref", str(ref), "--beam", "2",
                          "--device", "cpu", "--json", "--record", name]) == 0
        report = json.loads(capsys.readouterr().out)
    recorded = {key: report[key]["score"] for key in ("bleu", "bleu_lowercase", "chrf", "placeholders")}
    assert recorded["placeholders"] is None  # no source has a placeholder: not measured, not 0 or 100
    card = read_card(model_dir)
    assert (card.domain, card.scores) == ("captions", {"first": recorded, "second": recorded})
    assert eval_main(["--model-dir", str(model_dir), "--src", str(src), "--record", "x"]) == 2
    assert capsys.readouterr().err == "phrasal-eval: error: --record needs references: --split, or --src with --ref\n"
    # A malformed card is one line and exit 2 before anything is decoded, and stays as it was.
    (model_dir / "model_card.json").write_text('{"domain": "captions", "bleu": 40}')
    assert eval_main(["--model-dir", str(model_dir), "--src", str(src), "--ref", str(ref), "--device", "cpu",
                      "--record", "third"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"phrasal-eval: error: --record: {model_dir / 'model_card.json'}: bleu: ") and err.count("\n") == 1
    assert (model_dir / "model_card.json").read_text() == '{"domain": "captions", "bleu": 40}'


@pytest.mark.parametrize("argv, message", [
    (["train", "--recipe", "no/such.json", "--out", "x"], "phrasal-train: error: no/such.json: file not found"),
    (["train", "--recipe", str(SMOKE), "--out", "x", "--set", "bogus=1"],
     "phrasal-train: error: --set: unknown key(s): 'bogus'"),
    (["train", "--recipe", str(SMOKE), "--out", "x", "--set", "lr"],
     "phrasal-train: error: --set: --set 'lr' must be KEY=VALUE"),
    (["train", "--recipe", str(SMOKE), "--out", "x", "--max-updates", "0"],
     "phrasal-train: error: --max-updates: max_updates must be a positive integer, got 0"),
    (["train", "--out", "x"], "phrasal-train: error: --recipe is required (or --resume with a run directory that holds recipe.json)"),
    (["average", "--run", "no/such/run", "--last", "2", "--out", "y"],
     "phrasal-train: error: --run: no checkpoints in no/such/run/checkpoints"),
    (["train", "--recipe", str(SMOKE), "--out", "x", "--spm", "no/such.model"],
     "phrasal-train: error: --spm: no/such.model is not a file"),
    (["train", "--recipe", str(SMOKE), "--out", "x", "--spm", str(SMOKE), "--init", "models/en-de"],
     "phrasal-train: error: --spm: --init brings its SentencePiece model; leave --spm out"),
    (["frobnicate"], "phrasal-train: error: argument command: invalid choice: 'frobnicate' (choose from "),
])
def test_cli_bad_input_exits_2_with_one_line(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert train_main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(message) and captured.err.count("\n") == 1 and captured.err.endswith("\n")
    if not message.endswith("(choose from "):  # argparse words the list of choices differently across versions
        assert captured.err == message + "\n"
    assert captured.out == ""


def test_cli_unknown_recipe_key_in_a_subprocess(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**json.loads(SMOKE.read_text()), "dropout": 0.1}))
    proc = subprocess.run([sys.executable, "-m", "training", "train", "--recipe", str(bad), "--out", str(tmp_path / "r")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == f"phrasal-train: error: {bad}: unknown key(s): 'dropout'\n"
    assert not (tmp_path / "r").exists()


def test_evaluate_bad_input_exits_2(tmp_path, capsys):
    assert eval_main(["--model-dir", str(tmp_path / "none"), "--split", "test_2016_flickr"]) == 2
    assert capsys.readouterr().err == f"phrasal-eval: error: model directory {tmp_path / 'none'} does not exist\n"
    assert eval_main(["--model-dir", "m", "--split", "s", "--length-penalty-form", "mean"]) == 2
    err = capsys.readouterr().err  # argparse words the list of choices differently across versions
    assert err.startswith("phrasal-eval: error: argument --length-penalty-form: invalid choice: 'mean' (choose from ")
    assert err.count("\n") == 1


def test_a_given_sentencepiece_model_is_used_instead_of_training_one(smoke_run, tmp_path, monkeypatch):
    """`--spm`: the other direction's SentencePiece model, so that a train-symmetric run can start from both."""
    import training.loop

    def refuse(*args, **kwargs):
        raise AssertionError("a SentencePiece model was trained although one was given")

    monkeypatch.setattr(training.loop, "train_sentencepiece", refuse)
    given = smoke_run[0] / "spm.model"
    reverse = smoke(source_lang="de", target_lang="en", max_updates=1)
    train(reverse, tmp_path / "de-en", device="cpu", progress=False, export=False, spm=given)
    assert (tmp_path / "de-en" / "spm.model").read_bytes() == given.read_bytes()
