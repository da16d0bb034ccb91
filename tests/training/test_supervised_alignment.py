"""The supervised alignment head (model/supervised_alignment.py) and its training: the loss against a
hand-computed value, the label rows, the eflomal label cache round trip, the head under every attention
kind (the loss runs and its gradient reaches the head and nothing above it), incremental decoding equal
to the full pass, and `train --init` (every weight kept, new ones listed, frozen parts untouched)."""
import gzip
import json
import math
from pathlib import Path

import pytest
import torch

from model.model_dir import load_model_dir, save_model_dir
from model.config import ModelConfig
from model.errors import ConfigError
from model.transformer import Transformer
from tests.helpers import tiny_config
from training import alignment_labels as labels
from training import alignment_metrics as am
from training.cli import main as train_main
from training.losses import supervised_alignment_loss
from tests.training.support import read_log
from tests.helpers import HAND_FORMULA_OPS, TINY_MODEL_OPS, assert_close_for

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "recipes" / "smoke.json"

pytestmark = pytest.mark.usefixtures("one_thread")


# -- the loss and its label rows ----------------------------------------------------------------
def test_loss_is_the_mean_cross_entropy_of_the_linked_rows():
    attention = torch.tensor([[[0.5, 0.25, 0.25], [0.1, 0.2, 0.7], [0.3, 0.3, 0.4]]])  # (1, 3, 3)
    targets = torch.tensor([[[0.0, 0.0, 0.0], [0.5, 0.0, 0.5], [0.0, 1.0, 0.0]]])  # row 0 unsupervised
    expected = -(0.5 * math.log(0.1) + 0.5 * math.log(0.7) + math.log(0.3)) / 2
    assert_close_for(supervised_alignment_loss(attention, targets), expected, ops=HAND_FORMULA_OPS)


def test_a_padded_position_with_zero_attention_costs_nothing():
    attention = torch.tensor([[[1.0, 0.0]]])
    targets = torch.tensor([[[1.0, 0.0]]])
    loss = supervised_alignment_loss(attention, targets)
    assert loss.item() == 0.0 and not math.isnan(loss.item())


def test_target_rows_put_piece_k_on_the_step_that_reads_it():
    # pair 0: target piece 0 <- source pieces 0 and 2; target piece 1 <- source 1. pair 1: piece 0 <- 0.
    rows = labels.target_rows([[(0, 0), (2, 0), (1, 1)], [(0, 0)]], target_len=3, source_len=4)
    expected = torch.zeros(2, 3, 4)
    expected[0, 1, 0] = expected[0, 1, 2] = 0.5
    expected[0, 2, 1] = 1.0
    expected[1, 1, 0] = 1.0
    assert torch.equal(rows, expected)


# -- labels: words, pieces, symmetrisation, the cache ---------------------------------------------
def test_words_split_punctuation_from_words():
    assert labels.words("A man, in blue.") == ["A", "man", ",", "in", "blue", "."]


def test_grow_diag_final_and_only_adds_final_links_between_two_unaligned_words():
    # (3, 0) is in one direction only and no neighbour of an aligned point, so FINAL decides it:
    # its source word 3 is unaligned (-final adds it) but its target word 0 is aligned (-final-and does not).
    assert am.grow_diag_final({(0, 0), (3, 0)}, {(0, 0)}) == {(0, 0), (3, 0)}
    assert am.grow_diag_final_and({(0, 0), (3, 0)}, {(0, 0)}) == {(0, 0)}
    # Two unaligned words linked in one direction only: both add it.
    assert am.grow_diag_final_and({(0, 0), (3, 3)}, {(0, 0)}) == {(0, 0), (3, 3)}


class _Pieces:
    """A stand-in tokenizer: every word is split into pieces of at most 2 characters."""

    def encode_with_offsets(self, text):
        spans = []
        for start, end in labels.word_spans(text):
            spans += [(k, min(k + 2, end)) for k in range(start, end, 2)]
        return list(range(len(spans))), ["x"] * len(spans), spans


def test_piece_links_link_every_piece_of_two_linked_words():
    # source words: "abc" (pieces 0, 1), "d" (piece 2); target words: "ef" (0), "ghij" (1, 2)
    links = labels.piece_links("abc d", "ef ghij", {(0, 1), (1, 0)}, _Pieces())
    assert sorted(links) == [(0, 1), (0, 2), (1, 1), (1, 2), (2, 0)]


@pytest.fixture
def tiny_split(tmp_path):
    pairs = [("a small dog runs .", "ein kleiner hund rennt ."), ("a dog .", "ein hund ."),
             ("a small cat .", "eine kleine katze ."), ("the cat runs .", "die katze rennt .")] * 5
    for lang, side in (("en", 0), ("de", 1)):
        with gzip.open(tmp_path / f"train.{lang}.gz", "wt", encoding="utf-8") as handle:
            handle.write("".join(pair[side] + "\n" for pair in pairs))
    return tmp_path


def test_labels_round_trip_and_a_stale_cache_is_refused(tiny_split):
    pytest.importorskip("eflomal")
    out, meta = labels.build_labels(tiny_split, "train", "en", "de")
    assert out == tiny_split / "train.en-de.align.gz" and meta["pairs"] == 20
    written = gzip.open(out, "rt", encoding="utf-8").read().splitlines()
    read = labels.read_labels(tiny_split, "train", "en", "de")
    assert [am.pharaoh(links) for links in read] == written
    assert meta["links"] == sum(len(links) for links in read) > 0
    stored = json.loads((tiny_split / "train.en-de.align.json").read_text())
    assert stored["symmetrisation"] == "grow-diag-final-and" and stored["command"] == labels.rebuild_command(
        tiny_split, "train", "en", "de")
    # The other direction reads the same links transposed (grow-diag-final-and is symmetric).
    assert labels.read_labels(tiny_split, "train", "de", "en") == [{(j, i) for i, j in links} for links in read]
    meta_file = tiny_split / "train.en-de.align.json"
    meta_file.write_text(json.dumps({**stored, "symmetrisation": "intersection"}))
    with pytest.raises(labels.LabelError, match="not symmetrised"):
        labels.read_labels(tiny_split, "train", "de", "en")
    meta_file.write_text(json.dumps(stored))
    with gzip.open(tiny_split / "train.de.gz", "at", encoding="utf-8") as handle:
        handle.write("noch ein satz .\n")
    with pytest.raises(labels.LabelError, match="rebuild it with: python -m training.alignment_labels"):
        labels.read_labels(tiny_split, "train", "en", "de")
    with pytest.raises(labels.LabelError, match="--source en --target de"):
        labels.read_labels(tiny_split, "train", "de", "en")


def test_missing_labels_name_the_command_that_builds_them(tmp_path):
    with pytest.raises(labels.LabelError) as error:
        labels.read_labels(tmp_path, "train", "en", "de")
    assert str(error.value) == (f"no alignment labels at {tmp_path / 'train.en-de.align.gz'}; build them with: "
                                f"python -m training.alignment_labels --data-dir {tmp_path} --split train "
                                f"--source en --target de")


# -- the config ---------------------------------------------------------------------------------
def test_config_problems_are_reported_together():
    with pytest.raises(ConfigError) as error:
        tiny_config(supervised_alignment={"layer": 5, "head": 9, "weight": -1, "width": 1})
    assert error.value.problems == [
        "supervised_alignment: unknown option(s) ['width']; known options: head, layer, weight, heads, "
        "self_attention, diagonal, link_threshold",
        "supervised_alignment: layer must index a decoder layer in [-2, 2), got 5",
        "supervised_alignment: head must be a head index in [0, 4) or 'added', got 9",
        "supervised_alignment: weight must be a number >= 0, got -1",
    ]


def test_a_bigram_head_of_homogeneous_ngram_attention_is_refused():
    cross = {"kind": "queryk", "options": {"structure": "homogeneous", "ngrams": [1, 2], "heads_per_ngram": [2, 2]}}
    with pytest.raises(ConfigError) as error:
        ModelConfig.from_dict({**tiny_config().to_dict(), "cross_attention": cross,
                               "supervised_alignment": {"layer": 0, "head": 2, "weight": 1.0}})
    assert error.value.problems == [
        "supervised_alignment: head 2 of the homogeneous cross-attention attends to 2-grams and can put at most "
        "1/2 of its weight on one word; supervise a unigram head (heads [0, 1] are unigram)"]


def test_the_config_round_trips_with_the_head():
    config = tiny_config(supervised_alignment={"layer": -1, "head": "added", "weight": 0.5})
    assert ModelConfig.from_dict(json.loads(config.to_json())) == config


# -- every attention kind -------------------------------------------------------------------------
KINDS = {
    "vanilla": {},
    "convkv heterogeneous": {"cross_attention": {"kind": "convkv", "options": {"structure": "heterogeneous",
                                                                                "ngrams": [1, 2]}}},
    "queryk homogeneous": {"cross_attention": {"kind": "queryk", "options": {
        "structure": "homogeneous", "ngrams": [1, 2], "heads_per_ngram": [2, 2]}}},
    "queryk interleaved": {"cross_attention": {"kind": "queryk", "options": {"structure": "interleaved",
                                                                              "ngrams": [1, 2]}}},
    "fine2d": {"cross_attention": {"kind": "fine2d", "options": {}}},
    "phrase representation": {"phrase_representation": {"glance": "mean"}},
    "alignment biases": {"alignment_biases": {"position": {}, "markov": {"window": 1, "form": "parallel"}, "fertility": {"window": 1, "form": "parallel"}}},
}


def _model(head, extra, layer=0):
    torch.manual_seed(0)
    config = ModelConfig.from_dict({**tiny_config().to_dict(), **extra,
                                    "supervised_alignment": {"layer": layer, "head": head, "weight": 1.0}})
    return Transformer(config)


SRC = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
TGT_IN = torch.tensor([[1, 11, 12, 13], [1, 14, 15, 0]])
TARGETS = torch.zeros(2, 4, 5)
TARGETS[0, 1, 0] = TARGETS[0, 2, 2] = TARGETS[0, 3, 1] = TARGETS[1, 1, 1] = 1.0


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("head", [0, "added"])
def test_the_loss_reaches_the_supervised_head_and_nothing_above_it(kind, head):
    model = _model(head, KINDS[kind])
    out = model(SRC, TGT_IN)
    loss = supervised_alignment_loss(out.supervised_attention, TARGETS)
    assert torch.isfinite(loss) and loss.item() > 0
    loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    head_part = "supervised_alignment." if head == "added" else "decoder_layers.0.cross_attention."
    assert any(g is not None and g.abs().sum() > 0 for name, g in grads.items() if name.startswith(head_part))
    # Layers above the head, the output norm and the decoder's last layer never see this loss.
    above = [name for name in grads if name.startswith(("decoder_layers.1.", "decoder_norm."))]
    assert above and all(grads[name] is None or grads[name].abs().sum() == 0 for name in above)


@pytest.mark.parametrize("kind", ["vanilla", "queryk interleaved", "alignment biases"])
@pytest.mark.parametrize("head", [1, "added"])
def test_incremental_decoding_gives_the_full_pass_rows(kind, head):
    model = _model(head, KINDS[kind], layer=-1).eval()
    with torch.no_grad():
        full = model(SRC, TGT_IN).supervised_attention  # (B, T, S)
        state = model.init_state(model.encode(SRC))
        rows = []
        for t in range(TGT_IN.shape[1]):
            out = model.decode_step(TGT_IN[:, t], state, need_supervised=True)
            state = out.state
            rows.append(out.supervised_attention)
    assert_close_for(torch.stack(rows, dim=1), full, ops=TINY_MODEL_OPS)


def test_the_added_head_leaves_translation_unchanged():
    plain = Transformer(tiny_config())
    with_head = _model("added", {})
    with_head.load_state_dict(plain.state_dict(), strict=False)
    with torch.no_grad():
        assert torch.equal(plain.eval()(SRC, TGT_IN).logits, with_head.eval()(SRC, TGT_IN).logits)


# -- train --init -------------------------------------------------------------------------------
FAST = ["train_limit=48", "valid_limit=8", "max_tokens=512", "max_len=40", "log_interval=1", "val_interval=100",
        "val_bleu_sentences=0", "checkpoint_interval=2", "keep_last=2", "average_last=1"]


@pytest.fixture(scope="module")
def initial_dir(tmp_path_factory, tiny_spm):
    from training.recipe import load_recipe

    config = load_recipe(SMOKE).model_config(500)
    torch.manual_seed(7)
    return save_model_dir(tmp_path_factory.mktemp("init") / "en-de", Transformer(config), tiny_spm,
                          source_lang="en", target_lang="de")


def _train(run_dir, initial, *sets):
    argv = ["train", "--recipe", str(SMOKE), "--out", str(run_dir), "--device", "cpu", "--quiet", "--no-export",
            "--init", str(initial), "--max-updates", "2", "--set", f"data_dir={REPO / 'data' / 'multi30k'}"]
    for item in (*FAST, *sets):
        argv += ["--set", item]
    return train_main(argv)


def test_init_keeps_every_weight_and_lists_the_new_ones(tmp_path, initial_dir):
    head = 'model.supervised_alignment={"layer": 0, "head": "added", "weight": 1.0}'
    assert _train(tmp_path / "run", initial_dir, head, 'trainable=["supervised_alignment."]') == 0
    event = read_log(tmp_path / "run", "init")[0]
    assert event["new_weights"] == [f"supervised_alignment.{p}.{w}" for p in ("k_proj", "q_proj", "query_norm")
                                    for w in ("bias", "weight")]
    # One label list per kept pair (max_len drops a few of the 48).
    kept = read_log(tmp_path / "run", "data")[0]["train_pairs"]
    assert read_log(tmp_path / "run", "alignment_labels")[0]["pairs"] == kept and 40 < kept <= 48
    from training import checkpoints as ckpt

    trained = ckpt.load_checkpoint(ckpt.list_checkpoints(tmp_path / "run" / "checkpoints")[-1])["model"]
    initial = load_model_dir(initial_dir).model.state_dict()
    # Frozen: every initial weight is exactly where it was; the head moved.
    assert all(torch.equal(trained[name], tensor) for name, tensor in initial.items())
    assert read_log(tmp_path / "run", "train")[-1]["alignment"] > 0
    assert (tmp_path / "run" / "spm.model").read_bytes() == (initial_dir / "spm.model").read_bytes()


def test_init_from_a_model_with_a_head_the_recipe_leaves_out_copies_every_other_weight(tmp_path, initial_dir):
    # Fine-tuning the translation of a model whose head is trained again afterwards.
    head = 'model.supervised_alignment={"layer": 0, "head": "added", "weight": 1.0}'
    assert _train(tmp_path / "headed", initial_dir, head, 'trainable=["supervised_alignment."]',
                  "checkpoint_interval=1") == 0
    from training import checkpoints as ckpt

    headed = ckpt.list_checkpoints(tmp_path / "headed" / "checkpoints")[-1]
    with_head = ckpt.load_checkpoint(headed)["model"]
    assert _train(tmp_path / "plain", headed, 'trainable=["decoder_norm."]') == 0
    event = read_log(tmp_path / "plain", "init")[0]
    assert event["new_weights"] == [] and event["removed_heads"] == ["supervised_alignment."]
    trained = ckpt.load_checkpoint(ckpt.list_checkpoints(tmp_path / "plain" / "checkpoints")[-1])["model"]
    # The head is gone; every frozen weight is the initial model's (the trained norm moved).
    assert sorted(trained) == sorted(name for name in with_head if not name.startswith("supervised_alignment."))
    assert all(torch.equal(trained[name], with_head[name]) for name in trained if not name.startswith("decoder_norm."))
    assert not torch.equal(trained["decoder_norm.weight"], with_head["decoder_norm.weight"])


def test_init_with_a_changed_architecture_exits_2_with_one_line(tmp_path, initial_dir, capsys):
    assert _train(tmp_path / "run", initial_dir, "model.d_model=64") == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"phrasal-train: error: --init: {initial_dir} has a different model config than the recipe "
                   f"gives (differs in d_model; only activation_dropout, alignment_biases, alignment_layer, "
                   f"attention_dropout, dropout, global_fertility, supervised_alignment may change)")


def test_a_trainable_prefix_that_names_nothing_is_refused(tmp_path, initial_dir, capsys):
    assert _train(tmp_path / "run", initial_dir, 'trainable=["decoder_layer."]') == 2
    assert capsys.readouterr().err.strip() == (
        "phrasal-train: error: trainable: 'decoder_layer.' names no parameter of the model")


def test_the_directional_objective_adds_lambda_times_the_alignment_loss():
    from types import SimpleNamespace

    from training.data import collate
    from training.loop import DirectionalObjective
    from training.losses import label_smoothed_loss

    torch.manual_seed(0)
    model = Transformer(tiny_config(supervised_alignment={"layer": 0, "head": 1, "weight": 0.25})).train()
    pairs = [([5, 6, 7], [8, 9]), ([10], [11, 12, 13])]
    labels = [[(0, 0), (2, 1)], [(0, 2)]]  # dataset index -> (source piece, target piece) links
    session = SimpleNamespace(recipe=SimpleNamespace(label_smoothing=0.1), device=torch.device("cpu"), amp=False,
                              data=SimpleNamespace(train_alignment=labels))
    batch = collate(pairs, [0, 1])
    loss, tallies, tokens = DirectionalObjective(model, session).update(batch)
    out = model(batch.src, batch.tgt_in)  # dropout 0: the pass repeats exactly
    xent = label_smoothed_loss(out.logits, batch.tgt_out, smoothing=0.1)
    # target piece k is read at step k + 1; source width 3 + EOS, target width 3 + BOS.
    rows = torch.zeros(2, 4, 4)
    rows[0, 1, 0] = rows[0, 2, 2] = rows[1, 3, 0] = 1.0
    alignment = supervised_alignment_loss(out.supervised_attention, rows)
    assert_close_for(loss, xent.loss + 0.25 * alignment, ops=TINY_MODEL_OPS)
    assert tokens == 3 + 4
    assert_close_for(tallies["alignment"][0], alignment * tokens, ops=HAND_FORMULA_OPS)
