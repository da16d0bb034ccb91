"""The memory of short messages the train split's packages translate alike (training/corpus/terms.py),
on cached fixture packages made here."""
from __future__ import annotations

from pathlib import Path

from service.memory import TranslationMemory
from training.corpus.build import read_jsonl_gzip, write_gzip
from training.corpus.cli import main as corpus_main
from training.corpus.terms import agreed, build_terms, units, votes
from tests.training.test_corpus import _cached


def test_a_translation_is_agreed_by_two_packages_more_than_any_other_and_half_of_them():
    found, german = votes([
        [("Search Results", "Suchergebnisse"), ("Clear", "Leeren"), ("Stop", "Stopp"), ("Open", "Öffnen"),
         ("Quit", "Beenden"), ("Quit", "Beenden")],                      # one vote a package
        [("Search Results", "Suchergebnisse"), ("Clear", "Leeren"), ("Stop", "Stopp"), ("Open", "Offen"),
         ("Quit", "Verlassen")],
        [("Search Results", "Ergebnisse der Suche"), ("Clear", "Löschen"), ("Stop", "Anhalten")],
        [("Clear", "Löschen"), ("Stop", "Beenden")],
        [("Stop", "Halt")],
    ])
    assert found["Quit"] == {"Beenden": 1, "Verlassen": 1}
    # Search Results: 2 of 3. Clear: a tie. Stop: 2 of 5, under half. Open, Quit: one package each.
    assert agreed(found, set()) == [("Search Results", "Suchergebnisse", 2, 3)]
    assert agreed(found, {"searchresults"}) == []                      # its English is in a valid or test split
    # Read the other way: the usual English of a German message.
    assert german["Beenden"] == {"Quit": 1, "Stop": 1}
    # Clear's tie is two agreements read from German.
    assert agreed(german, set()) == [("Leeren", "Clear", 2, 2), ("Löschen", "Clear", 2, 2), ("Stopp", "Stop", 2, 2),
                                     ("Suchergebnisse", "Search Results", 2, 2)]


def test_a_pair_agreed_both_ways_serves_both_directions_and_one_agreed_one_way_that_one():
    english = [("Cancel", "Abbrechen", 5, 6), ("Close", "Schließen", 3, 3)]
    german = [("Abbrechen", "Abort", 4, 7), ("Schließen", "Close", 3, 4)]
    assert units(english, german) == [("Abort", "Abbrechen", "de"), ("Cancel", "Abbrechen", "en"),
                                      ("Close", "Schließen", None)]


def test_the_memory_and_the_short_splits_come_from_the_cached_packages(tmp_path):
    cache, corpus = tmp_path / "cache", tmp_path / "corpus"
    common = [("Search Results", "Suchergebnisse"), ("ISDN", "ISDN"), ("Open the file", "Open the file"),
              ("Could not open the file", "Datei konnte nicht geöffnet werden"), ("Zoom in", "Vergrößern")]
    _cached(cache, "p1", "p1", {"p1.mo": common + [("_Print", "_Drucken")]})
    _cached(cache, "p2", "p2", {"p2.mo": common + [("Print", "Drucken"), ("Quit", "Beenden")],
                                "p2-extra.mo": [("Quit", "Beenden")]})
    _cached(cache, "beta", "beta", {"beta.mo": [("Search Results", "Suchergebnisse"), ("Quit", "Verlassen"),
                                                ("Could not open the file", "Kann Datei nicht öffnen")]})
    _cached(cache, "gamma", "gamma", {"gamma.mo": [("Help", "Hilfe")]})
    corpus.mkdir()
    write_gzip(corpus / "train.origin.gz", ["p1\tp1.mo", "p2\tp2.mo"])
    write_gzip(corpus / "valid.origin.gz", ["beta\tbeta.mo"])
    write_gzip(corpus / "test.origin.gz", ["gamma\tgamma.mo"])
    write_gzip(corpus / "valid.en.gz", ["Zoom in"])
    write_gzip(corpus / "test.en.gz", ["Help"])
    memory = tmp_path / "terms.tmx"
    said = build_terms(corpus, cache, memory)
    assert said.splitlines()[0] == (f"{memory}: 3 units: en->de 3, de->en 3 messages "
                                    "(5 English and 5 German short messages voted on)")
    # "_Print" and "Print" are one message; ISDN a kept name; "Open the file" an untranslated copy
    # (a function word), five words too many, "Zoom in" in the valid split, Quit in one package.
    loaded = TranslationMemory.load(memory)
    assert loaded.directions[("en", "de")] == {"ISDN": "ISDN", "Print": "Drucken", "Search Results": "Suchergebnisse"}
    assert loaded.directions[("de", "en")] == {"ISDN": "ISDN", "Drucken": "Print", "Suchergebnisse": "Search Results"}
    # Every short message of a split's packages, once a package, those train has too included.
    assert [(r["source"], r["target"], r["package"]) for r in read_jsonl_gzip(corpus / "valid.short.jsonl.gz")] == [
        ("Quit", "Verlassen", "beta"), ("Search Results", "Suchergebnisse", "beta")]
    assert read_jsonl_gzip(corpus / "valid.short.jsonl.gz")[0]["written"] == ["Quit", "Verlassen"]
    assert [r["source"] for r in read_jsonl_gzip(corpus / "test.short.jsonl.gz")] == ["Help"]
    first = memory.read_bytes()
    build_terms(corpus, cache, memory)
    assert memory.read_bytes() == first                                  # the same packages give the same bytes


def test_the_cli_names_a_corpus_without_its_splits_in_one_line(tmp_path, capsys):
    sources = tmp_path / "s.tsv"
    sources.write_text("package\tversion\tarchitecture\tsource\tsize\tsha256\tfilename\n")
    assert corpus_main(["terms", "--sources", str(sources), "--cache", str(tmp_path), "--corpus", str(tmp_path / "c"),
                        "--tmx", str(tmp_path / "t.tmx")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"python -m training.corpus: error: --corpus: no such file: {tmp_path / 'c' / 'train.origin.gz'}, "
        f"{tmp_path / 'c' / 'valid.origin.gz'}, {tmp_path / 'c' / 'test.origin.gz'}")
    assert corpus_main(["terms", "--sources", str(sources), "--cache", str(tmp_path), "--corpus", str(tmp_path / "c"),
                        "--tmx", str(tmp_path / "t.tmx"), "--min-share", "1.5"]) == 2
    assert capsys.readouterr().err.strip() == (
        "python -m training.corpus: error: --min-packages must be >= 1 and --min-share in (0, 1]")
