"""Forced-decoding alignments and the align_eval CLI on tiny models made here."""
import json
import sys

import pytest
import torch

from model.model_dir import load_model_dir, save_model_dir
from tests.helpers import tiny_config, tiny_model
from training import alignment_metrics as am
from model.alignments.bidirectional import agreement_links
from training.align_eval import main, row_file
from training.forced_alignment import (align_direction, encode_words, forced_attention, hard_links,
                                       model_for_layer, soft_links, word_owner, word_weights)
from tests.helpers import HAND_FORMULA_OPS, TINY_MODEL_OPS, assert_close_for

SRC = ["A man rides a bike .", "Two dogs play .", "A girl sings ."]
TGT = ["Ein Mann fährt ein Fahrrad .", "Zwei Hunde spielen .", "Ein Mädchen singt ."]
GOLD = ["0-0 1-1 2-2 3-3 4-4 5-5p", "0-0 1-1 2-2 3-3", "0-0 1-1 2-2 3p3"]


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_spm):
    root = tmp_path_factory.mktemp("align")
    save_model_dir(root / "en-de", tiny_model(seed=0), tiny_spm, source_lang="en", target_lang="de")
    save_model_dir(root / "de-en", tiny_model(seed=1), tiny_spm, source_lang="de", target_lang="en")
    for name, lines in (("src.en", SRC), ("tgt.de", TGT), ("gold.txt", GOLD)):
        (root / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return root


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# -- pieces -> words -> links --------------------------------------------------------------------------
def test_word_owner_follows_the_character_spans():
    # "ab c de": a piece belongs to the word its span starts in; an empty span (a bare "▁") to none.
    assert word_owner(["ab", "c", "de"], [(0, 1), (1, 2), (3, 4), (5, 5), (5, 7)]) == [0, 0, 1, None, 2]


def test_encoded_words_coincide_with_whitespace_tokens(tiny_spm):
    from model.text.tokenizer import Tokenizer

    tokenizer = Tokenizer(tiny_spm)
    words = "Ein Mädchen , singt .".split()
    encoded = encode_words(tokenizer, words)
    pieces = [tokenizer.id_to_piece(i) for i in encoded.ids]
    # the pieces of each word spell the word; only bare "▁" pieces (SentencePiece puts one before "," here)
    # belong to no word
    spelled = ["".join(p for p, o in zip(pieces, encoded.owner) if o == k).lstrip("\u2581")
               for k in range(len(words))]
    assert spelled == words
    assert [p for p, o in zip(pieces, encoded.owner) if o is None] == ["\u2581"] * encoded.owner.count(None)


def test_word_weights_sum_source_pieces_and_average_target_pieces():
    attention = torch.tensor([[0.5, 0.25, 0.25],
                              [0.1, 0.1, 0.8],
                              [0.0, 0.6, 0.4]], dtype=torch.float64)
    # target pieces 0, 1 -> word 0, piece 2 -> word 1; source pieces 0, 1 -> word 0, piece 2 -> word 1
    weights = word_weights(attention, [0, 0, 1], [0, 0, 1], 2, 2)
    # word 0: mean of rows 0, 1 = [0.3, 0.175, 0.525] -> [0.475, 0.525]; word 1: [0.6, 0.4]
    assert_close_for(weights, [[0.475, 0.525], [0.6, 0.4]], ops=HAND_FORMULA_OPS)
    # a target word with no pieces gets a zero row, a source piece of no word is dropped
    weights = word_weights(attention, [0, 0, 0], [0, None, 1], 2, 2)
    # word 0 = mean of all three rows = [0.2, 0.95/3 (dropped), 1.45/3]
    assert_close_for(weights, [[0.6 / 3, 1.45 / 3], [0.0, 0.0]], ops=HAND_FORMULA_OPS)


def test_hard_and_soft_links():
    weights = torch.tensor([[0.2, 0.5, 0.3], [0.4, 0.4, 0.0], [0.0, 0.0, 0.0]])
    assert hard_links(weights) == {(1, 0), (0, 1)}  # tie -> the lower source word; an empty row -> no link
    # shares of each row: [0.2, 0.5, 0.3], [0.5, 0.5, 0]
    assert soft_links(weights, 0.3) == {(1, 0), (2, 0), (0, 1), (1, 1)}
    assert hard_links(torch.tensor([[float("nan"), 1.0]])) == set()


# -- forced decoding ----------------------------------------------------------------------------------
def test_forced_rows_are_the_attention_of_incremental_decoding():
    model = tiny_model(seed=0)
    source, target = [5, 6, 7], [8, 9]
    forced = forced_attention(model, [source], [target])[0]
    shifted = forced_attention(model, [source], [target], shift=True)[0]
    with torch.no_grad():
        memory = model.encode(torch.tensor([source + [model.config.eos_id]]))
        state = model.init_state(memory)
        steps = []
        for token in [model.config.bos_id, *target]:
            out = model.decode_step(torch.tensor([token]), state)
            attention, state = out.attention, out.state
            steps.append(attention[0, : len(source)].double())
    # row k predicts target piece k (input BOS, y0, ...); shifted row k reads piece k
    assert_close_for(forced, torch.stack(steps[:2]), ops=TINY_MODEL_OPS, dtype=torch.float32)
    assert_close_for(shifted, torch.stack(steps[1:]), ops=TINY_MODEL_OPS, dtype=torch.float32)
    # batching with a longer pair (padding on both sides) changes nothing
    batched = forced_attention(model, [[10, 11, 12, 13, 14], source], [[15, 16, 17], target], batch_size=2)[1]
    assert_close_for(batched, forced, ops=TINY_MODEL_OPS, dtype=torch.float32)


def test_model_for_layer_reads_another_layer_with_the_same_weights():
    model = tiny_model(seed=0)
    assert model_for_layer(model, -1) is model and model_for_layer(model, 1) is model
    src, tgt_in = torch.tensor([[5, 6, 2]]), torch.tensor([[1, 8, 9]])
    layer0 = model_for_layer(model, 0)(src, tgt_in, need_attention=True).attention
    built = tiny_model(seed=0, alignment_layer=0)(src, tgt_in, need_attention=True).attention
    assert torch.equal(layer0, built)
    assert not torch.allclose(layer0, model(src, tgt_in, need_attention=True).attention)
    with pytest.raises(am.AlignmentInputError) as error:
        model_for_layer(model, 2)
    assert str(error.value) == "--layer 2: the model has 2 decoder layers (0..1, or negative from the end)"
    assert tiny_config().alignment_layer == -1


# -- the CLI ----------------------------------------------------------------------------------------
def expected_rows(files, layer=None, threshold=None):
    """The rows recomputed with the pure functions from the alignments the models give."""
    src, tgt = [s.split() for s in SRC], [t.split() for t in TGT]
    forward = align_direction(load_model_dir(files / "en-de"), src, tgt, layer=layer, threshold=threshold)
    reverse = align_direction(load_model_dir(files / "de-en"), tgt, src, threshold=threshold)
    back = [am.transpose(links) for links in reverse.hard]
    rows = {
        "forward": forward.hard, "reverse": back,
        "intersection": [f & r for f, r in zip(forward.hard, back)],
        "union": [f | r for f, r in zip(forward.hard, back)],
        "grow-diag-final": [am.grow_diag_final(f, r) for f, r in zip(forward.hard, back)],
        "grow-diag-final-and": [am.grow_diag_final_and(f, r) for f, r in zip(forward.hard, back)],
    }
    if threshold is not None:
        rows[f"forward soft>={threshold:g}"] = forward.soft
        rows[f"reverse soft>={threshold:g}"] = [am.transpose(links) for links in reverse.soft]
    return rows


def test_cli_reports_what_the_pure_functions_compute(files, capsys):
    code, out, err = cli(capsys, "--model-dir", files / "en-de", "--reverse-model-dir", files / "de-en",
                         "--src", files / "src.en", "--tgt", files / "tgt.de", "--gold", files / "gold.txt",
                         "--layer", 0, "--soft-threshold", 0.3, "--reference", "diagonal",
                         "--device", "cpu", "--json", "--write-alignments", files / "out")
    assert (code, err) == (0, "")
    report = json.loads(out)
    assert report["gold"] == {"path": str(files / "gold.txt"), "format": "pharaoh", "base": 0, "reverse": False,
                              "sure": 12, "possible": 14}
    gold, _, _ = am.read_gold(GOLD, 3)
    rows = expected_rows(files, layer=0, threshold=0.3)
    rows["diagonal"] = [am.diagonal(len(s.split()), len(t.split())) for s, t in zip(SRC, TGT)]
    assert list(report["results"]) == list(rows)
    for name, links in rows.items():
        assert report["results"][name] == am.score(links, gold).to_dict(), name
        written = (files / "out" / row_file(name)).read_text().splitlines()
        assert written == [am.pharaoh(a) for a in links]
    # one hard link per target word, inside the sentence
    assert [len(a) for a in rows["forward"]] == [6, 4, 4]
    assert all(i < 6 for a in rows["forward"] for i, _ in a)
    # the diagonal is right on every sure link of these monotone pairs: recall 1
    assert report["results"]["diagonal"]["recall"] == 1.0


def test_bidirectional_row_is_the_services_combination(files, capsys):
    # --row-column with a reverse model: the reverse matrix read both ways, the two link sets by
    # grow-diag-final-and, and the service's bidirectional links (model/alignments/bidirectional.py).
    code, out, err = cli(capsys, "--model-dir", files / "en-de", "--reverse-model-dir", files / "de-en",
                         "--src", files / "src.en", "--tgt", files / "tgt.de", "--gold", files / "gold.txt",
                         "--row-column", "--device", "cpu", "--json")
    assert (code, err) == (0, "")
    results = json.loads(out)["results"]
    src, tgt = [s.split() for s in SRC], [t.split() for t in TGT]
    forward = align_direction(load_model_dir(files / "en-de"), src, tgt)
    reverse = align_direction(load_model_dir(files / "de-en"), tgt, src)
    gold, _, _ = am.read_gold(GOLD, 3)
    assert list(results)[-4:] == ["forward row+column", "reverse row+column", "gdfa of row+column sets",
                                  "bidirectional"]
    back = [am.transpose(links) for links in reverse.symmetric]
    assert results["reverse row+column"] == am.score(back, gold).to_dict()
    sets = [am.grow_diag_final_and(f, r) for f, r in zip(forward.symmetric, back)]
    assert results["gdfa of row+column sets"] == am.score(sets, gold).to_dict()
    # The service's combination from the words' soft links, as a TokenAlignment carries them.
    combined = [agreement_links(f, r, s, t)[0] for f, r, s, t in zip(forward.rows, reverse.rows, src, tgt)]
    assert results["bidirectional"] == am.score(combined, gold).to_dict()
    assert combined != forward.symmetric and combined != back  # neither direction alone here


def test_cli_table(files, capsys):
    code, out, err = cli(capsys, "--model-dir", files / "en-de", "--src", files / "src.en", "--tgt", files / "tgt.de",
                         "--gold", files / "gold.txt", "--device", "cpu")
    assert (code, err) == (0, "")
    counts = am.score(expected_rows(files)["forward"], am.read_gold(GOLD, 3)[0])
    lines = out.splitlines()
    assert lines[1] == f"gold {files / 'gold.txt'} (pharaoh, 0-based): 12 sure, 14 possible links"
    assert lines[3] == (f"{'forward':34s} {counts.links:7d}    {counts.precision:6.4f}  {counts.recall:6.4f}  "
                        f"{counts.aer:6.4f}")
    assert len(lines) == 4


def test_cli_reads_naacl_gold_one_based(files, capsys, tmp_path):
    # the same links as GOLD, as 1-based "sent i j S|P" lines, plus a NULL link
    naacl = ["1 1 1 S", "1 2 2", "1 3 3", "1 4 4", "1 5 5", "1 6 6 P", "1 0 3",
             "2 1 1", "2 2 2", "2 3 3", "2 4 4", "3 1 1", "3 2 2", "3 3 3", "3 4 4 P"]
    (tmp_path / "gold.naacl").write_text("\n".join(naacl) + "\n")
    runs = []
    for gold in (files / "gold.txt", tmp_path / "gold.naacl"):
        code, out, _ = cli(capsys, "--model-dir", files / "en-de", "--src", files / "src.en", "--tgt",
                           files / "tgt.de", "--gold", gold, "--device", "cpu", "--json")
        assert code == 0
        runs.append(json.loads(out))
    assert (runs[1]["gold"]["format"], runs[1]["gold"]["base"]) == ("naacl", 1)
    assert runs[0]["results"] == runs[1]["results"]


def test_eflomal_reference(files, capsys):
    pytest.importorskip("eflomal")
    code, out, err = cli(capsys, "--model-dir", files / "en-de", "--src", files / "src.en", "--tgt", files / "tgt.de",
                         "--gold", files / "gold.txt", "--reference", "eflomal", "--device", "cpu", "--json",
                         "--write-alignments", files / "eflomal")
    assert (code, err) == (0, "")
    results = json.loads(out)["results"]
    assert list(results) == ["forward", "eflomal forward", "eflomal reverse", "eflomal intersection",
                             "eflomal union", "eflomal grow-diag-final", "eflomal grow-diag-final-and"]
    read = {name: [am.parse_links(line) for line in (files / "eflomal" / row_file(f"eflomal {name}")).read_text()
                   .splitlines()]
            for name in ("forward", "reverse", "intersection", "grow-diag-final")}
    assert read["intersection"] == [f & r for f, r in zip(read["forward"], read["reverse"])]
    assert read["grow-diag-final"] == [am.grow_diag_final(f, r) for f, r in zip(read["forward"], read["reverse"])]
    gold = am.read_gold(GOLD, 3)[0]
    for name in read:  # each score is the score of the links written for it
        assert results[f"eflomal {name}"] == am.score(read[name], gold).to_dict(), name


# -- bad input: exit 2, one line ----------------------------------------------------------------------
def test_missing_eflomal_is_one_line(files, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "eflomal", None)
    code, out, err = cli(capsys, "--model-dir", files / "en-de", "--src", files / "src.en", "--tgt", files / "tgt.de",
                         "--gold", files / "gold.txt", "--reference", "eflomal", "--device", "cpu")
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("phrasal-align-eval: error: --reference eflomal needs the eflomal package "
                          "(pip install eflomal): ")


@pytest.mark.parametrize("case, message", [
    ("missing", "data file not found: {root}/nope.en"),
    ("count", "--src has 3 lines but --tgt has 2"),
    ("range", "{root}/bad.txt: sentence 2 (line 2 of the text files): link 1-4 (source-target, 0-based) "
              "is outside a pair of 4 source and 4 target words"),
    ("token", "{root}/bad.txt line 1: '0_0' is not a link (i-j, i-jp, ipj or i?j)"),
    ("gold-lines", "{root}/bad.txt has 2 lines but the text files have 3 sentences"),
    ("layer", "--layer 5: the model has 2 decoder layers (0..1, or negative from the end)"),
    ("nothing", "nothing to do: give --gold to score, --agreement, or --write-alignments DIR to write the links"),
    ("extra", "--eflomal-extra needs --reference eflomal"),
    ("cognates", "--cognate-weight must be >= 0, got -1"),
    ("direction", "--reverse-model-dir translates en->de, expected de->en"),
    ("model", "model directory {root}/none does not exist"),
])
def test_bad_input_exits_2_with_one_line(files, capsys, case, message):
    root = files
    args = {"--model-dir": root / "en-de", "--src": root / "src.en", "--tgt": root / "tgt.de",
            "--gold": root / "gold.txt", "--device": "cpu"}
    bad = root / "bad.txt"
    if case == "missing":
        args["--src"] = root / "nope.en"
    elif case == "count":
        (root / "short.de").write_text("Ein Mann .\nZwei .\n")
        args["--tgt"] = root / "short.de"
    elif case == "range":
        bad.write_text("0-0\n0-0 1-4\n0-0\n")
        args["--gold"] = bad
    elif case == "token":
        bad.write_text("0_0\n\n\n")
        args["--gold"] = bad
    elif case == "gold-lines":
        bad.write_text("0-0\n0-0\n")
        args["--gold"] = bad
    elif case == "layer":
        args["--layer"] = 5
    elif case == "extra":
        args["--eflomal-extra"] = 10
    elif case == "cognates":
        args["--cognate-weight"] = -1
    elif case == "nothing":
        del args["--gold"]
    elif case == "direction":
        args["--reverse-model-dir"] = root / "en-de"
    elif case == "model":
        args["--model-dir"] = root / "none"
    code, out, err = cli(capsys, *[x for kv in args.items() for x in kv])
    assert (code, out) == (2, "")
    assert err == f"phrasal-align-eval: error: {message.format(root=root)}\n"


def test_the_bundled_gold_set_is_what_its_readme_says():
    # data/gold_align_deen_dev/README.md: 50 pairs, 599 sure links, German-English, every
    # link inside its sentences once reversed into English-German (source-target).
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "data" / "gold_align_deen_dev"
    en = (root / "test.en").read_text(encoding="utf-8").splitlines()
    de = (root / "test.de").read_text(encoding="utf-8").splitlines()
    lines = (root / "de-en.wa").read_text(encoding="utf-8").splitlines()
    gold, fmt, base = am.read_gold(lines, len(en), reverse=True)
    assert (len(en), len(de), fmt, base) == (50, 50, "pharaoh", 0)
    assert sum(len(g.sure) for g in gold) == 599
    assert all(g.possible == g.sure for g in gold)
    assert all(i < len(e.split()) and j < len(d.split()) for g, e, d in zip(gold, en, de) for i, j in g.sure)


def test_word_weights_leave_glued_punctuation_out_as_the_service_does():
    from model.alignments.word_alignment import word_attention

    generator = torch.Generator().manual_seed(0)
    attention = torch.rand(5, 6, generator=generator, dtype=torch.float64)
    target_owner, source_owner = [0, 0, 1, 2, 2], [0, 1, 1, None, 2, 2]
    target_glued, source_glued = [False, True, False, False, False], [False, False, True, False, False, True]
    got = word_weights(attention, target_owner, source_owner, 3, 3, target_glued, source_glued)
    want = word_attention(attention.tolist(), target_owner, source_owner, 3, 3, target_glued, source_glued)
    assert torch.allclose(got, torch.tensor(want, dtype=torch.float64), rtol=1e-12, atol=1e-12)
    # Each row keeps its total over the words: the glued columns' mass is spread, not dropped.
    plain = word_weights(attention, target_owner, source_owner, 3, 3, target_glued)
    assert torch.allclose(got.sum(dim=1), plain.sum(dim=1), rtol=1e-12, atol=1e-12)
    assert not torch.allclose(got, plain)
