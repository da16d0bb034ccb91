"""Global fertility in the one-direction objective, and bilingual symmetric training: the objective equals
its formula, a run from the CLI writes two servable model dirs, starts from pretrained ones, resumes,
and bad input ends with exit code 2 and one line."""
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from model.model_dir import load_model_dir, save_model_dir
from model.decoding.generate import generate, source_batch
from model.decoding.options import DecodingOptions
from model.transformer import Transformer
from training import checkpoints as ckpt
from training import symmetric
from training.cli import main as train_main
from training.data import collate, reverse_batch
from training.loop import DirectionalObjective
from training.losses import global_fertility_loss, label_smoothed_loss, real_token_mask, trace_bonus
from training.recipe import load_recipe
from training.symmetric import DirectionPair, SymmetricObjective, initial_pair, read_initial_model, train_symmetric
from training.translate import translate_batch
from tests.training.support import read_log
from tests.helpers import HAND_FORMULA_OPS, TINY_MODEL_OPS, assert_close_for

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "recipes" / "smoke.json"
PAIRS = [([5, 6, 7], [8, 9]), ([10], [11, 12, 13, 14]), ([15, 16, 17, 18], [19])]
# A few updates of the smoke model on a few dozen pairs: seconds, not minutes.
FAST = ["train_limit=48", "valid_limit=8", "max_tokens=512", "max_len=40", "log_interval=1", "val_interval=100",
        "val_bleu_sentences=2", "decode_max_len_a=0.5", "decode_max_len_b=2", "checkpoint_interval=2",
        "keep_last=2", "average_last=1", "val_beam=1"]


pytestmark = pytest.mark.usefixtures("one_thread")


def smoke(*overrides):
    return load_recipe(SMOKE, [f"data_dir={REPO / 'data' / 'multi30k'}", *FAST, *overrides])


def fake_session(recipe):
    return SimpleNamespace(recipe=recipe, device=torch.device("cpu"), amp=False)


def test_reverse_batch_equals_collating_the_swapped_pairs():
    forward, reference = reverse_batch(collate(PAIRS)), collate([(t, s) for s, t in PAIRS])
    assert torch.equal(forward.src, reference.src) and torch.equal(forward.tgt_in, reference.tgt_in)
    assert torch.equal(forward.tgt_out, reference.tgt_out)


def test_directional_objective_adds_the_weighted_fertility_loss():
    recipe = smoke("model.global_fertility={\"weight\": 0.25, \"layer\": 0}")
    torch.manual_seed(0)
    model = Transformer(recipe.model_config(400)).train()
    batch = collate(PAIRS)
    loss, tallies, tokens = DirectionalObjective(model, fake_session(recipe)).update(batch)
    out = model(batch.src, batch.tgt_in)  # dropout is 0 in the smoke recipe: the pass repeats exactly
    xent = label_smoothed_loss(out.logits, batch.tgt_out, smoothing=recipe.label_smoothing)
    fertility = global_fertility_loss(out.fertility_attention, batch.tgt_out.ne(0), batch.src.ne(0),
                                      out.fertility_mean, out.fertility_variance)
    assert_close_for(loss, xent.loss + 0.25 * fertility, ops=TINY_MODEL_OPS)
    assert tokens == 3 + 5 + 2 and tallies["fertility"][1] == 4 + 2 + 5
    assert_close_for(tallies["fertility"][0], fertility * 11, ops=HAND_FORMULA_OPS)


def test_symmetric_objective_is_both_cross_entropies_minus_lambda_times_the_trace_bonus():
    recipe = smoke('symmetric={"lambda": 0.5}')
    pair = DirectionPair(recipe.model_config(400)).train()
    batch = collate(PAIRS)
    loss, tallies, tokens = SymmetricObjective(pair, fake_session(recipe), None).update(batch)
    back = collate([(t, s) for s, t in PAIRS])
    f = pair.s2t(batch.src, batch.tgt_in, need_attention=True)
    b = pair.t2s(back.src, back.tgt_in, need_attention=True)
    xf = label_smoothed_loss(f.logits, batch.tgt_out, smoothing=0.1).loss
    xb = label_smoothed_loss(b.logits, back.tgt_out, smoothing=0.1).loss
    words = (real_token_mask(batch.src, 0, 2), real_token_mask(batch.tgt_out, 0, 2))
    bonus = trace_bonus(f.attention, b.attention, *words)
    assert_close_for(loss, xf + xb - 0.5 * bonus, ops=TINY_MODEL_OPS)
    # The bonus is normalised by the mean length: ((3 + 2) + (1 + 4) + (4 + 1)) / 2 = 7.5 words.
    assert tallies["trace"][1] == 7.5
    assert_close_for(tallies["trace"][0], bonus * 7.5, ops=HAND_FORMULA_OPS)
    assert tokens == (3 + 5 + 2) + (4 + 2 + 5)
    assert sorted(tallies) == ["loss", "loss.de-en", "loss.en-de", "nll.de-en", "nll.en-de", "trace"]


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, tiny_spm):
    """Two one-direction model dirs (untrained, different seeds) sharing the tiny SentencePiece model."""
    root = tmp_path_factory.mktemp("pretrained")
    config = smoke().model_config(500)
    dirs = {}
    for seed, (src, tgt) in ((7, ("en", "de")), (8, ("de", "en"))):
        torch.manual_seed(seed)
        dirs[f"{src}-{tgt}"] = save_model_dir(root / f"{src}-{tgt}", Transformer(config), tiny_spm,
                                              source_lang=src, target_lang=tgt)
    return dirs


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory, pretrained):
    """train-symmetric from the CLI, starting from the pretrained dirs, 3 updates."""
    run_dir = tmp_path_factory.mktemp("runs") / "sym"
    seen = {}
    real_fit = symmetric.fit

    def spying_fit(session, objective, **kwargs):
        seen["before"] = {name: t.detach().clone() for name, t in objective.module.state_dict().items()}
        return real_fit(session, objective, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(symmetric, "fit", spying_fit)
        argv = ["train-symmetric", "--recipe", str(SMOKE), "--out", str(run_dir), "--device", "cpu", "--quiet",
                "--set", f"data_dir={REPO / 'data' / 'multi30k'}", "--set", 'symmetric={"lambda": 1.0}',
                "--max-updates", "3", "--init-forward", str(pretrained["en-de"]),
                "--init-backward", str(pretrained["de-en"])]
        for item in FAST:
            argv += ["--set", item]
        assert train_main(argv) == 0
    return run_dir, seen


def test_initial_models_are_loaded_before_the_first_update(cli_run, pretrained, tiny_spm):
    run_dir, seen = cli_run
    for part, name in (("s2t", "en-de"), ("t2s", "de-en")):
        reference = load_model_dir(pretrained[name]).model.state_dict()
        for key, tensor in reference.items():
            assert torch.equal(seen["before"][f"{part}.{key}"], tensor), key
    # ... and trained after: the first update moved them.
    after = ckpt.model_state(ckpt.list_checkpoints(run_dir / "checkpoints")[-1])
    assert not torch.equal(after["s2t.decoder_norm.weight"], seen["before"]["s2t.decoder_norm.weight"])
    assert (run_dir / "spm.model").read_bytes() == tiny_spm.read_bytes()
    assert read_log(run_dir, "init")[0]["forward"] == str(pretrained["en-de"])


def test_the_initial_pair_is_the_pretrained_pair(pretrained):
    recipe = smoke('symmetric={"lambda": 1.0}')
    initial = {"--init-forward": read_initial_model(pretrained["en-de"], "--init-forward"),
               "--init-backward": read_initial_model(pretrained["de-en"], "--init-backward")}
    assert symmetric.check_initial_models(recipe, initial) == pretrained["en-de"] / "spm.model"
    pair = initial_pair(recipe.model_config(500), recipe.seed, initial)
    weight = "decoder_layers.0.cross_attention.q_proj.weight"
    assert torch.equal(pair.s2t.state_dict()[weight], load_model_dir(pretrained["en-de"]).model.state_dict()[weight])
    assert torch.equal(pair.t2s.state_dict()[weight], load_model_dir(pretrained["de-en"]).model.state_dict()[weight])


def test_cli_run_logs_both_directions_and_the_trace(cli_run):
    run_dir, _ = cli_run
    train = read_log(run_dir, "train")
    assert [r["step"] for r in train] == [1, 2, 3]
    for record in train:
        assert 0 < record["trace"] < 1
        assert_close_for(record["loss"], record["loss.en-de"] + record["loss.de-en"] - record["trace"], ops=TINY_MODEL_OPS)
        assert {"nll.en-de", "nll.de-en", "grad_norm.en-de", "grad_norm.de-en"} <= set(record)
    (valid,) = read_log(run_dir, "valid")
    assert valid["step"] == 3 and 0 < valid["trace"] < 1
    for name in ("en-de", "de-en"):
        assert valid[name]["loss"] > 0 and valid[name]["bleu_sentences"] == 2
    assert [r["step"] for r in read_log(run_dir, "checkpoint")] == [2, 3]


def test_each_direction_is_a_servable_model_dir(cli_run):
    run_dir, _ = cli_run
    averaged = ckpt.model_state(ckpt.list_checkpoints(run_dir / "checkpoints")[-1])
    for part, (src, tgt) in (("s2t", ("en", "de")), ("t2s", ("de", "en"))):
        loaded = load_model_dir(run_dir / "models" / f"{src}-{tgt}")
        assert (loaded.source_lang, loaded.target_lang) == (src, tgt)
        assert loaded.manifest["training"]["direction"] == f"{src}-{tgt}"
        assert loaded.manifest["training"]["symmetric"] == {"lambda": 1.0}
        for key, tensor in loaded.model.state_dict().items():
            assert torch.equal(tensor, averaged[f"{part}.{key}"]), key
        texts = ["A dog runs.", "Ein Hund läuft."]
        hyps = translate_batch(loaded.model, loaded.tokenizer, texts, beam=2, max_length_ratio=0.5, max_length_offset=2)
        options = DecodingOptions(beam_size=2, n_best=1, max_length_ratio=0.5, max_length_offset=2)
        for text, hyp in zip(texts, hyps, strict=True):
            (best,) = generate(loaded.model, source_batch(loaded.tokenizer, [text], torch.device("cpu")), options)
            assert hyp == loaded.tokenizer.decode(best[0].tokens)


def test_average_subcommand_exports_both_directions(cli_run, tmp_path, capsys):
    run_dir, _ = cli_run
    assert train_main(["average", "--run", str(run_dir), "--last", "2", "--out", str(tmp_path / "avg")]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{tmp_path / 'avg' / 'en-de'} (en-de, average of checkpoint_0000002.pt, checkpoint_0000003.pt)",
        f"{tmp_path / 'avg' / 'de-en'} (de-en, average of checkpoint_0000002.pt, checkpoint_0000003.pt)",
    ]
    assert load_model_dir(tmp_path / "avg" / "de-en").manifest["training"]["steps"] == [2, 3]


def test_symmetric_resume_continues_the_same_run(tmp_path):
    recipe = smoke('symmetric={"lambda": 1.0}', "max_updates=4", "val_bleu_sentences=0")
    whole = train_symmetric(recipe, tmp_path / "whole", device="cpu", progress=False, export=False)
    train_symmetric(recipe.replace(max_updates=2), tmp_path / "split", device="cpu", progress=False, export=False)
    resumed = train_symmetric(recipe, tmp_path / "split", device="cpu", resume=True, progress=False, export=False)
    assert whole.step == resumed.step == 4
    before = {r["step"]: (r["loss"], r["trace"]) for r in read_log(tmp_path / "whole", "train")}
    after = {r["step"]: (r["loss"], r["trace"]) for r in read_log(tmp_path / "split", "train")}
    assert after == before
    a = ckpt.model_state(tmp_path / "whole" / "checkpoints" / "checkpoint_0000004.pt")
    b = ckpt.model_state(tmp_path / "split" / "checkpoints" / "checkpoint_0000004.pt")
    assert all(torch.equal(a[name], b[name]) for name in a)


def test_the_symmetric_recipes_are_the_tiny_recipe_plus_one_key():
    tiny = load_recipe(REPO / "recipes" / "transformer-tiny-en-de.json").to_dict()
    sym = load_recipe(REPO / "recipes" / "symmetric-tiny-en-de.json").to_dict()
    fert = load_recipe(REPO / "recipes" / "global-fertility-tiny-en-de.json").to_dict()
    assert sym == {**tiny, "name": "symmetric-tiny-en-de", "symmetric": {"lambda": 1.0}}
    assert fert == {**tiny, "name": "global-fertility-tiny-en-de",
                    "model": {**tiny["model"], "global_fertility": {"weight": 1.0, "reduction": "sum", "layer": -1}}}
    config = load_recipe(REPO / "recipes" / "global-fertility-tiny-en-de.json").model_config(10000)
    assert Transformer(config).global_fertility.layer_index == 3


def test_the_finetune_recipe_is_the_symmetric_recipe_on_a_fine_tuning_schedule():
    sym = load_recipe(REPO / "recipes" / "symmetric-tiny-en-de.json").to_dict()
    finetune = load_recipe(REPO / "recipes" / "symmetric-finetune-tiny-en-de.json").to_dict()
    changed = {k for k in sym if sym[k] != finetune[k]}
    assert changed == {"name", "max_tokens", "max_updates", "lr", "warmup", "amp", "log_interval", "val_interval",
                       "val_bleu_sentences", "keep_last", "average_last"}
    assert (finetune["model"], finetune["symmetric"]) == (sym["model"], {"lambda": 1.0})


def test_initial_models_may_differ_from_the_recipe_in_dropout_only(tiny_spm):
    from model.text.tokenizer import Tokenizer
    from training.initialization import InitialModel
    from training.recipe import RecipeError

    recipe = load_recipe(SMOKE, ['symmetric={"lambda": 1.0}'])
    config = recipe.model_config(Tokenizer(tiny_spm).vocab_size).to_dict()
    lighter = InitialModel(Path("de-en"), {}, {**config, "dropout": 0.2}, tiny_spm, "de", "en")
    assert symmetric.check_initial_models(recipe, {"--init-backward": lighter}) == tiny_spm
    wider = InitialModel(Path("de-en"), {}, {**config, "dropout": 0.2, "d_ff": 7}, tiny_spm, "de", "en")
    with pytest.raises(RecipeError) as raised:
        symmetric.check_initial_models(recipe, {"--init-backward": wider})
    assert raised.value.problems == ["de-en has a different model config than the recipe gives (differs in d_ff)"]


def bad(tmp_path, *argv):
    return ["train-symmetric", "--recipe", str(SMOKE), "--out", str(tmp_path / "r"), "--device", "cpu",
            "--set", 'symmetric={"lambda": 1.0}', *argv]


@pytest.mark.parametrize("argv, message", [
    (lambda t, p: ["train-symmetric", "--recipe", str(SMOKE), "--out", str(t / "r")],
     lambda t, p: "--recipe: train-symmetric needs a recipe with a 'symmetric' object, e.g. {\"lambda\": 1.0}"),
    (lambda t, p: ["train", "--recipe", str(REPO / "recipes" / "symmetric-tiny-en-de.json"), "--out", str(t / "r")],
     lambda t, p: "--recipe: recipe 'symmetric-tiny-en-de' has 'symmetric' (two directions): train it with train-symmetric"),
    (lambda t, p: bad(t, "--set", 'symmetric={"lambda": -1, "mu": 2}'),
     lambda t, p: f"{SMOKE}: symmetric: unknown key(s) 'mu'; known keys: lambda; symmetric: lambda must be a number >= 0, got -1"),
    (lambda t, p: bad(t, "--set", 'model.global_fertility={"weight": -1, "layer": 5}'),
     lambda t, p: f"{SMOKE}: model: global_fertility: weight must be a number >= 0, got -1; "
                  "model: global_fertility: layer must index a decoder layer in [-1, 1), got 5"),
    (lambda t, p: bad(t, "--init-forward", str(t)),
     lambda t, p: f"--init-forward: {t} is neither a model directory (manifest.json), a training checkpoint (.pt) "
                  "nor a run directory (checkpoints/)"),
    (lambda t, p: bad(t, "--init-forward", str(p["de-en"])),
     lambda t, p: f"--init-forward: {p['de-en']} translates de->en, but this direction of the recipe is en->de"),
    (lambda t, p: bad(t, "--init-backward", str(p["de-en"]), "--set", "model.d_model=64"),
     lambda t, p: f"--init-backward: {p['de-en']} has a different model config than the recipe gives (differs in d_model)"),
])
def test_cli_bad_input_exits_2_with_one_line(argv, message, tmp_path, pretrained, capsys):
    assert train_main(argv(tmp_path, pretrained)) == 2
    assert capsys.readouterr().err == f"phrasal-train: error: {message(tmp_path, pretrained)}\n"
    assert not (tmp_path / "r").exists()
