"""The CLDR name lexicon (training/corpus/names.py): which names are kept, where they go, and that
the committed data/cldr_names is what the builder writes with the pinned babel."""
from __future__ import annotations

import gzip
import sys
from collections import Counter
from pathlib import Path

import pytest

from service.memory import TranslationMemory
from training.corpus.build import excluded_keys, write_gzip
from training.corpus.tmx import write_tmx
from training.corpus.cli import main as corpus_main
from training.corpus.names import Name, build_names, cldr_names, lexicon, memory_names, split_of

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "data" / "cldr_names"


def test_names_pair_cldr_keys_across_categories():
    names = {name.origin: (name.en, name.de) for name in cldr_names()}
    assert names["territory:AT"] == ("Austria", "Österreich")
    assert names["language:de"] == ("German", "Deutsch")
    assert names["currency:CHF"] == ("Swiss Franc", "Schweizer Franken")
    assert names["month:3"] == ("March", "März")
    assert names["weekday:0"] == ("Monday", "Montag")
    assert names["metazone:Europe_Central:standard"] == ("Central European Standard Time",
                                                         "Mitteleuropäische Normalzeit")
    assert names["city:Europe/Vienna"] == ("Vienna", "Wien")
    assert not any(origin.startswith("city:Etc/") for origin in names)


def test_ambiguous_duplicate_empty_and_excluded_names_are_left_out():
    names = [Name("territory:NO", "Norway", "Norwegen"),
             Name("language:x1", "Kurdish", "Kurdisch"), Name("language:x2", "Kurdish", "Kurmandschi"),
             Name("city:A/B", "Norway", "Norwegen"),
             Name("script:Zz", "  ", "Leer"),
             Name("territory:SE", "Sweden", "Schweden"),
             Name("month:3", "March  ", "März")]
    counts: Counter[str] = Counter()
    out = lexicon(names, excluded={"sweden"}, counts=counts)
    kept = [(n.origin, n.en, n.de) for split in ("train", "valid") for n in out[split]]
    assert sorted(kept) == [("month:3", "March", "März"), ("territory:NO", "Norway", "Norwegen")]
    assert counts == Counter({"kept": 2, "two German names": 2, "duplicate": 1, "empty": 1,
                              "in an excluded split": 1})


def test_the_memory_leaves_out_special_scripts_and_scripts_named_like_countries():
    names = [Name("territory:MM", "Myanmar (Burma)", "Myanmar"), Name("script:Mymr", "Myanmar", "Birmanisch"),
             Name("script:Zyyy", "Common", "Unbestimmt"), Name("script:Latn", "Latin", "Lateinisch"),
             Name("month:3", "March", "März"), Name("territory:NO", "Norway", "Norwegen")]
    by_split = {"train": [names[n] for n in (0, 1, 2, 3)], "valid": [names[4]]}  # Norway: not in the lexicon
    assert [name.origin for name in memory_names(names, by_split)] == ["territory:MM", "script:Latn", "month:3"]


def test_the_split_is_a_tenth_by_the_english_names_hash():
    # sha256(b"Iceland")[:8] as an integer is 0 modulo 10; "Austria"'s is not.
    assert (split_of("Iceland"), split_of("Austria")) == ("valid", "train")
    committed = {split: (COMMITTED / f"{split}.en.gz") for split in ("train", "valid")}
    sizes = {split: len(gzip.decompress(path.read_bytes()).decode().splitlines()) for split, path in committed.items()}
    assert 0.07 < sizes["valid"] / (sizes["train"] + sizes["valid"]) < 0.13


def test_excluded_keys_read_only_valid_and_test_english(tmp_path):
    write_gzip(tmp_path / "train.en.gz", ["Norway"])
    write_gzip(tmp_path / "valid.en.gz", ["Sweden!"])
    write_gzip(tmp_path / "test.identical.en.gz", ["Ice land"])
    write_gzip(tmp_path / "test.de.gz", ["Finnland"])
    assert excluded_keys([tmp_path]) == {"sweden", "iceland"}


def test_the_committed_lexicon_is_what_the_builder_writes(tmp_path, monkeypatch):
    # The command its README names, written elsewhere: the same bytes, the README but for --out.
    monkeypatch.chdir(REPO)
    out = tmp_path / "names"
    said = build_names(out, [Path("data/debian_catalogs")], tmp_path / "cldr-names.tmx")
    assert said.endswith("cldr-names.tmx: 2086 names")
    # The translation memory `make serve` serves: every name, the same bytes.
    assert (tmp_path / "cldr-names.tmx").read_bytes() == (REPO / "memories" / "cldr-names.tmx").read_bytes()
    # LICENSE, CLDR's notice, is committed beside what the builder writes.
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in COMMITTED.iterdir() if p.name != "LICENSE")
    for path in sorted(COMMITTED.glob("*.gz")):
        assert (out / path.name).read_bytes() == path.read_bytes(), path.name
    readme = (out / "README.md").read_text(encoding="utf-8").replace(str(out), "data/cldr_names")
    assert readme == (COMMITTED / "README.md").read_text(encoding="utf-8")


def test_names_cli_refuses_a_missing_exclude_in_one_line(tmp_path, capsys):
    assert corpus_main(["names", "--out", str(tmp_path / "o"), "--exclude", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"python -m training.corpus: error: --exclude: no such directory: {tmp_path / 'none'}")
    assert not (tmp_path / "o").exists()


def test_names_cli_without_babel_says_what_to_install_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "babel", None)   # what an import of a package not installed raises
    monkeypatch.delitem(sys.modules, "training.corpus.names")
    assert corpus_main(["names", "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip() == (
        "python -m training.corpus: error: babel is not installed: pip install -e .")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("argv", [["names"], ["names", "--out"]])
def test_names_cli_needs_out(argv, capsys):
    assert corpus_main(argv) == 2
    assert "--out" in capsys.readouterr().err


def test_write_tmx_round_trips_through_the_services_reader_and_escapes(tmp_path):
    path = tmp_path / "m.tmx"
    units = [("a&b", {"en": 'Say "<hi>" & go', "de": "Sag „<hi>“ & geh"})]
    assert write_tmx(path, units, "en", note="a < b") == 1
    text = path.read_text(encoding="utf-8")
    assert '<tu tuid="a&amp;b">' in text and "<seg>Say \"&lt;hi&gt;\" &amp; go</seg>" in text
    assert "<note>a &lt; b</note>" in text
    assert TranslationMemory.load(path).get("en", "de", 'Say "<hi>" & go') == "Sag „<hi>“ & geh"
    write_tmx(path, units, "en", note="a < b")
    assert path.read_text(encoding="utf-8") == text
