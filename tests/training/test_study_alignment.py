"""The study's alignment figures (training.study_alignment) on tiny models made here: every
candidate method scored against gold in the right orientation, the best one chosen and reused for
the in-domain agreement with a reference file, and bad input as one line."""
import gzip
import json

import pytest

from model.model_dir import load_model_dir, save_model_dir
from tests.helpers import tiny_model
from training import alignment_metrics as am
from training.forced_alignment import align_direction
from training.study_alignment import main, reference_path

EN = ["a man rides a bike .", "two dogs play .", "a girl sings ."]
DE = ["ein mann fährt ein fahrrad .", "zwei hunde spielen .", "ein mädchen singt ."]
GOLD_DE_EN = ["0-0 1-1 2-2 3-3 4-4 5-5", "0-0 1-1 2-2 3-3", "0-0 1-1 2-2 3-3"]  # German first
REFERENCE = ["0-0 1-1 2-2", "0-0 1-1", "0-0 2-2"]


@pytest.fixture(scope="module")
def files(tmp_path_factory, tiny_spm):
    root = tmp_path_factory.mktemp("study-align")
    save_model_dir(root / "en-de", tiny_model(seed=0), tiny_spm, source_lang="en", target_lang="de")
    gold = root / "gold"
    gold.mkdir()
    for name, lines in (("test.en", EN), ("test.de", DE), ("de-en.wa", GOLD_DE_EN)):
        (gold / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    data = root / "data"
    data.mkdir()
    for lang, lines in (("en", EN), ("de", DE)):
        with gzip.open(data / f"test_2016_flickr.{lang}.gz", "wt", encoding="utf-8") as out:
            out.writelines(line + "\n" for line in lines)
    path = reference_path(root / "reference", "test_2016_flickr", "en", "de")
    path.parent.mkdir()
    path.write_text("".join(line + "\n" for line in REFERENCE), encoding="utf-8")
    return root


def test_every_candidate_is_scored_and_the_best_is_reused_in_domain(files, capsys):
    out = files / "alignment.json"
    code = main(["--model-dir", str(files / "en-de"), "--gold-dir", str(files / "gold"), "--reference-dir",
                 str(files / "reference"), "--data-dir", str(files / "data"), "--device", "cpu", "--out", str(out)])
    assert (code, capsys.readouterr().err) == (0, "")
    report = json.loads(out.read_text())
    loaded = load_model_dir(files / "en-de")
    words = lambda lines: [line.split() for line in lines]  # noqa: E731
    gold, _, _ = am.read_gold(GOLD_DE_EN, 3, "pharaoh", 0, reverse=True)  # the model is En->De: German second
    expected = {}
    for layer in (0, 1):
        for shift in (False, True):
            found = align_direction(loaded, words(EN), words(DE), layer=layer, shift=shift)
            name = f"layer {layer}" + (" shift" if shift else "")
            expected[f"{name}, argmax"] = am.score(found.hard, gold).aer
            expected[f"{name}, row+column"] = am.score(found.symmetric, gold).aer
    assert {row["method"]: row["aer"] for row in report["candidates"]} == {k: round(v, 4) for k, v in expected.items()}
    best = min(expected, key=expected.get)
    assert (report["method"], report["gold_aer"], report["gold_sentences"]) == (best, round(expected[best], 4), 3)
    row = next(r for r in report["candidates"] if r["method"] == best)
    found = align_direction(loaded, words(EN), words(DE), layer=row["layer"], shift=row["shift"])
    links = found.hard if row["reading"] == "argmax" else found.symmetric
    reference = [am.GoldAlignment.of(am.parse_links(line)) for line in REFERENCE]
    assert (report["agreement_aer"], report["agreement_sentences"]) == (round(am.score(links, reference).aer, 4), 3)


def test_missing_gold_is_one_line(files, capsys):
    code = main(["--model-dir", str(files / "en-de"), "--gold-dir", str(files / "data"), "--device", "cpu"])
    assert (code, capsys.readouterr().err) == (
        2, f"phrasal-study-alignment: error: {files / 'data'} has no en-de.wa or de-en.wa\n")
