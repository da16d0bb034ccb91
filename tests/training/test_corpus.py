"""The Debian catalog corpus builder on fixtures made here: .mo catalogs written by
`write_catalog` (checked against the standard library's own reader), a .deb built with
dpkg-deb and fetched from a file:// mirror, and a whole build over a cache of four packages with
hand-counted pairs, duplicates and splits."""
from __future__ import annotations

import gettext
import gzip
import hashlib
import io
import json
import shutil
import struct
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from training.corpus.archive import (HELD_OUT, Source, fetch_batch, is_fetched, licence_of, packages_with_catalogs,
                                     parse_apt_show, read_sources, write_sources)
from training.corpus.as_written import read_as_written, sources_of, write_as_written
from training.corpus.build import SplitSizes, assign_splits, build_corpus
from training.corpus.catalog import CatalogError, read_catalog, write_catalog
from training.corpus.clean import may_be_kept_identical, near_key, normalise, placeholders, rejection, strip_accelerators
from training.corpus.cli import main as corpus_main
from training.corpus.readme import render_readme

ENTRIES = [("Open", "Öffnen"), ("menu\x04Quit", "Beenden"), ("%d file\x00%d files", "%d Datei\x00%d Dateien"),
           ("Empty", ""), ("Save", "Speichern")]


def test_a_written_catalog_reads_back_singular_entries_context_removed():
    data = write_catalog(ENTRIES)
    catalog = read_catalog(data)
    assert sorted(catalog.entries) == [("Open", "Öffnen"), ("Quit", "Beenden"), ("Save", "Speichern")]
    assert (catalog.plural, catalog.empty, catalog.with_context, catalog.charset) == (1, 1, 1, "utf-8")
    # The standard library's reader agrees on the bytes (its keys keep the context and plurals).
    reference = gettext.GNUTranslations(io.BytesIO(data))
    assert reference.gettext("Open") == "Öffnen" and reference.pgettext("menu", "Quit") == "Beenden"
    assert reference.ngettext("%d file", "%d files", 2) == "%d Dateien"


def test_big_endian_and_latin1_catalogs_read_and_broken_ones_are_refused():
    little = write_catalog([("Size", "Größe")], charset="ISO-8859-1")
    assert read_catalog(little).entries == [("Size", "Größe")]
    count, originals, translations = struct.unpack("<3I", little[8:20])
    tables = struct.unpack(f"<{4 * count}I", little[20:20 + 16 * count])
    big = struct.pack(">5I", 0x950412DE, 0, count, originals, translations) + struct.pack(f">{4 * count}I", *tables)
    assert read_catalog(big + little[20 + 16 * count:]).entries == [("Size", "Größe")]
    with pytest.raises(CatalogError, match="magic number"):
        read_catalog(b"\x00" * 40)
    with pytest.raises(CatalogError, match="outside the file"):
        read_catalog(little[:30])


@pytest.mark.parametrize("source,target,expected", [
    ("_Open", "Ö_ffnen", ("Open", "Öffnen")),
    ("Save _As…", "Speichern _unter …", ("Save As…", "Speichern unter …")),
    ("&File", "&Datei", ("File", "Datei")),
    ("A &amp; B", "A &amp; C", ("A &amp; B", "A &amp; C")),             # an entity, not a marker
    ("file_name is %s", "file_name ist %s", ("file_name is %s", "file_name ist %s")),  # an identifier
    ("_Open _Recent", "Zuletzt _geöffnet", ("_Open _Recent", "Zuletzt _geöffnet")),    # two markers: unsure
    ("_Open", "&Öffnen", ("_Open", "&Öffnen")),                         # different kinds
])
def test_accelerator_markers_are_removed_only_when_both_sides_have_one(source, target, expected):
    assert strip_accelerators(source, target) == expected


def test_placeholders_compare_printf_without_positions_and_braces_by_name():
    assert placeholders("%2$s of %1$s, {0} in ${HOME} {name} 100%%") == Counter(
        {"%s": 2, "{0}": 1, "${HOME}": 1, "{name}": 1, "%%": 1})
    assert placeholders("100% sure") == Counter()   # no space flag: prose
    assert placeholders("%lu B") != placeholders("%d B")


@pytest.mark.parametrize("source,target,reason", [
    ("%s of %d", "%2$d von %1$s", None),
    ("%s files", "Dateien", "placeholders differ"),
    ("{name} saved", "{Name} gespeichert", "placeholders differ"),
    ("Status", "status", "untranslated copy"),
    ("translator-credits", "Hans Muster", "translator credits"),
    ("---", "---", "no letter"),
    ("OK", "Einverstanden, bitte fortfahren", "length ratio"),  # (31 + 10) / (2 + 10) = 3.42 > 3
    ("Tab", "Tabulator", None),                                  # (9 + 10) / (3 + 10) = 1.46
    ("A", "Eine sehr lange Übersetzung für einen Buchstaben", "length ratio"),
    ("x" * 501, "y" * 501, "over 500 characters"),
])
def test_rejection_reasons(source, target, reason):
    assert rejection(source, target) == reason


@pytest.mark.parametrize("text,kept", [
    ("Afghanistan", True), ("80 kbit/s", True), ("Unicode (UTF-8)", True), ("Remi Denis-Courmont", True),
    ("Open the file", False),                  # a function word: a phrase left in English
    ("Is it done", False), ("one two three four", True), ("one two three four five", False),
])
def test_which_untranslated_copies_may_be_translations_german_keeps(text, kept):
    assert may_be_kept_identical(text) is kept


def test_normalise_and_near_key():
    assert normalise("  Line one\n\tline  two ") == "Line one line two"
    assert normalise("Gro\u0308ße") == "Größe"          # NFC
    assert near_key("Open File…") == near_key("open file:") == "openfile"


def test_contents_lines_name_the_packages_with_german_catalogs_and_apt_records_pin_them():
    contents = [
        "usr/share/locale/de/LC_MESSAGES/foo.mo                      utils/foo,utils/foo-data\n",
        "usr/share/locale/de_DE/LC_MESSAGES/bar.mo                   games/bar\n",
        "usr/share/locale/de_AT/LC_MESSAGES/baz.mo                   games/baz\n",
        "usr/share/locale/fr/LC_MESSAGES/foo.mo                      utils/foo-fr\n",
        "usr/lib/python3/dist-packages/app/locale/de/LC_MESSAGES/django.mo python/python3-app\n",
    ]
    assert packages_with_catalogs(contents) == {"foo", "foo-data", "bar", "python3-app"}
    record = ("Package: foo\nVersion: 1:2.0-1+b1\nArchitecture: amd64\nSource: foo-src (2.0-1)\nSize: 1234\n"
              "SHA256: " + "ab" * 32 + "\nFilename: pool/main/f/foo-src/foo_2.0-1+b1_amd64.deb\nDescription: x\n"
              " more\n\nPackage: bar\nVersion: 3\nArchitecture: all\nSize: 5\nSHA256: " + "cd" * 32
              + "\nFilename: pool/main/b/bar/bar_3_all.deb\n")
    assert parse_apt_show(record) == [
        Source("foo", "1:2.0-1+b1", "amd64", "foo-src", 1234, "ab" * 32, "pool/main/f/foo-src/foo_2.0-1+b1_amd64.deb"),
        Source("bar", "3", "all", "bar", 5, "cd" * 32, "pool/main/b/bar/bar_3_all.deb")]


def test_the_sources_list_round_trips_and_refuses_held_out_packages(tmp_path):
    sources = [Source("foo", "1.0", "all", "foo", 10, "00" * 32, "pool/main/f/foo/foo_1.0_all.deb")]
    write_sources(tmp_path / "sources.tsv", sources)
    assert read_sources(tmp_path / "sources.tsv") == sources
    assert {"apt", "coreutils", "wget", "libc-l10n"} <= HELD_OUT and len(HELD_OUT) == 18
    write_sources(tmp_path / "held.tsv", [Source("grep", "3.8", "amd64", "grep", 1, "00" * 32, "p")])
    with pytest.raises(ValueError, match="grep is held out"):
        read_sources(tmp_path / "held.tsv")


def test_licence_is_the_stanza_covering_the_german_catalog():
    dep5 = ("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n"
            "Files: *\nCopyright: 2020 A\nLicense: GPL-3+\n\n"
            "Files: po/*\nCopyright: 2021 B\nLicense: LGPL-2.1+\n\n"
            "Files: src/x.c\nLicense: MIT\n\nLicense: GPL-3+\n text\n")
    assert licence_of(dep5) == "LGPL-2.1+"
    assert licence_of("Files: *\nLicense: Expat\n") == "Expat"
    assert licence_of("This is free software under the GNU General Public License.") == \
        "GPL (named in the copyright file's text)"


def _deb(tmp_path: Path, package: str, files: dict[str, bytes]) -> Path:
    root = tmp_path / f"{package}-root"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(f"Package: {package}\nVersion: 1.0\nArchitecture: all\n"
                                             "Maintainer: t <t@example.org>\nDescription: fixture\n")
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    deb = tmp_path / "mirror" / "pool" / f"{package}_1.0_all.deb"
    deb.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-b", str(root), str(deb)], check=True,
                   capture_output=True)
    return deb


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb (Debian's dpkg) is not installed")
def test_a_fetched_deb_leaves_its_catalogs_and_copyright_and_a_wrong_checksum_is_refused(tmp_path):
    mo = write_catalog([("Open", "Öffnen")])
    deb = _deb(tmp_path, "foo", {"usr/share/locale/de/LC_MESSAGES/foo.mo": mo,
                                 "usr/share/locale/fr/LC_MESSAGES/foo.mo": mo,
                                 "usr/share/doc/foo/copyright": b"Files: *\nLicense: GPL-2+\n",
                                 "usr/bin/foo": b"#!/bin/sh\n"})
    digest = hashlib.sha256(deb.read_bytes()).hexdigest()
    source = Source("foo", "1.0", "all", "foo", deb.stat().st_size, digest, "pool/foo_1.0_all.deb")
    cache, mirror = tmp_path / "cache", (tmp_path / "mirror").as_uri()
    cache.mkdir()
    fetch_batch([source], cache, mirror)
    assert is_fetched(source, cache)
    kept = sorted(str(p.relative_to(cache / "foo")) for p in (cache / "foo").rglob("*") if p.is_file())
    assert kept == ["fetched.json", "usr/share/doc/foo/copyright", "usr/share/locale/de/LC_MESSAGES/foo.mo"]
    assert json.loads((cache / "foo" / "fetched.json").read_text())["catalogs"] == [
        "usr/share/locale/de/LC_MESSAGES/foo.mo"]
    assert list(cache.iterdir()) == [cache / "foo"]           # the .deb and the staging directory are gone
    wrong = Source("foo", "1.0", "all", "foo", 1, "0" * 64, "pool/foo_1.0_all.deb")
    with pytest.raises(RuntimeError, match="SHA-256"):
        fetch_batch([wrong], cache, mirror)


def _cached(cache: Path, package: str, source: str, catalogs: dict[str, list[tuple[str, str]]]) -> Source:
    directory = cache / package
    paths = []
    for name, entries in catalogs.items():
        path = f"usr/share/locale/de/LC_MESSAGES/{name}"
        (directory / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / path).write_bytes(write_catalog(entries))
        paths.append(path)
    (directory / "usr/share/doc" / package).mkdir(parents=True, exist_ok=True)
    (directory / "usr/share/doc" / package / "copyright").write_text("Files: *\nLicense: GPL-2+\n")
    entry = Source(package, "1.0", "all", source, 1, hashlib.sha256(package.encode()).hexdigest(), "pool/x")
    (directory / "fetched.json").write_text(json.dumps({"sha256": entry.sha256, "catalogs": paths, "doc_link": None}))
    return entry


def _lines(path: Path) -> list[str]:
    return gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()


def test_a_build_splits_by_source_package_and_removes_duplicates_and_overlap(tmp_path):
    cache = tmp_path / "cache"
    sources = [
        _cached(cache, "alpha", "alpha", {"alpha.mo": [("Open file", "Datei öffnen"), ("Close", "Schließen"),
                                                       ("%s saved", "gespeichert"), ("Print", "Drucken"),
                                                       ("ISDN", "ISDN"), ("Open the file", "Open the file")]}),
        _cached(cache, "alpha-data", "alpha", {"extra.mo": [("Open file", "Datei öffnen"),
                                                            ("Open File…", "Datei Öffnen"), ("Quit", "Beenden")]}),
        _cached(cache, "beta", "beta", {"beta.mo": [("Close", "Schließen"), ("Zoom in", "Vergrößern"),
                                                    ("ISDN", "ISDN"), ("Help", "Help")]}),
        _cached(cache, "gamma", "gamma", {"gamma.mo": [("Print", "Drucken"), ("Help", "Hilfe"),
                                                       ("Status", "Status")]}),
    ]
    # sha256 of the source names: alpha 8ed3.., gamma be9d.., beta f44e..; alpha holds 6 clean pairs
    # (over package_max), gamma and beta 2 each (Status and "%s saved" are not clean).
    wanted = SplitSizes(test_pairs=2, valid_pairs=2, package_max=3)
    assert assign_splits({"alpha": 6, "beta": 2, "gamma": 2}, wanted) == {
        "alpha": "train", "gamma": "test", "beta": "valid"}
    assert assign_splits({"alpha": 3, "beta": 2, "gamma": 2}, wanted) == {
        "alpha": "test", "gamma": "valid", "beta": "train"}
    out = tmp_path / "corpus"
    build_corpus(sources, cache, out, wanted)
    # Entries come in msgfmt's order (msgids sorted). alpha + alpha-data: "%s saved" loses its
    # placeholder; "Open File…"/"Datei Öffnen" is a near and the second "Open file" an exact duplicate
    # of alpha's.
    assert _lines(out / "train.en.gz") == ["Close", "Open file", "Print", "Quit"]
    assert _lines(out / "train.de.gz") == ["Schließen", "Datei öffnen", "Drucken", "Beenden"]
    assert _lines(out / "train.origin.gz") == ["alpha\talpha.mo"] * 3 + ["alpha-data\textra.mo"]
    # valid (beta) and test (gamma) lose what train has (Close, Print).
    assert {split: _lines(out / f"{split}.en.gz") for split in ("valid", "test")} == {
        "valid": ["Zoom in"], "test": ["Help"]}
    stats = json.loads((out / "stats.json").read_text())
    assert stats["pairs"] == {"train": 4, "valid": 1, "test": 1}
    assert stats["dropped"]["exact duplicate"] == 1 and stats["dropped"]["near duplicate"] == 1
    assert stats["dropped"]["placeholders differ"] == 1
    # Identical pairs: ISDN kept apart in train (beta's is the same one again), Status in test; "Open
    # the file" has a function word, and gamma translates Help: both untranslated copies.
    assert {split: _lines(out / f"{split}.identical.en.gz") for split in ("train", "valid", "test")} == {
        "train": ["ISDN"], "valid": [], "test": ["Status"]}
    assert _lines(out / "test.identical.de.gz") == ["Status"]
    assert _lines(out / "test.identical.origin.gz") == ["gamma\tgamma.mo"]
    assert stats["identical"] == {"train": 1, "valid": 0, "test": 1}
    assert stats["dropped"]["untranslated copy"] == 2 and stats["dropped"]["identical: duplicate"] == 1
    assert stats["dropped"]["valid: English also in an earlier split"] == 1
    assert stats["dropped"]["test: English also in an earlier split"] == 1
    rows = [line.split("\t") for line in (out / "packages.tsv").read_text().splitlines()]
    assert rows[1] == ["alpha", "1.0", "alpha", "train", "1", "6", "3", "GPL-2+"]
    first = (out / "train.en.gz").read_bytes()
    build_corpus(sources, cache, out, wanted)
    assert (out / "train.en.gz").read_bytes() == first          # the same input gives the same bytes


def test_cli_errors_are_one_line_with_exit_code_2(tmp_path, capsys):
    assert corpus_main(["build", "--sources", str(tmp_path / "none.tsv"), "--cache", str(tmp_path),
                        "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"python -m training.corpus: error: --sources: no such file: {tmp_path / 'none.tsv'}")
    assert corpus_main(["select", "--contents", str(tmp_path / "c.gz"), "--sources", "x"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_the_valid_and_test_messages_as_written_come_from_the_entries_the_corpus_cleaned(tmp_path):
    cache = tmp_path / "cache"
    sources = [
        _cached(cache, "alpha", "alpha", {"alpha.mo": [("Open file", "Datei öffnen"), ("Close", "Schließen"),
                                                       ("Print", "Drucken"), ("Save", "Speichern"),
                                                       ("Undo", "Rückgängig"), ("Redo", "Wiederholen")]}),
        # "Zoom  in" and "_Zoom in" clean to one pair: the first in msgfmt's order (msgids sorted)
        # is the one the build kept, and the one read back.
        _cached(cache, "beta", "beta", {"beta.mo": [("_Zoom in", "_Vergrößern"), ("Show\nall\n", "Alle\nzeigen\n"),
                                                    ("Zoom  in", "Vergrößern"), ("_Quit", "_Beenden")]}),
        _cached(cache, "gamma", "gamma", {"gamma.mo": [("  -v   be  verbose\n", "  -v   ausführlich\n"),
                                                       ("Help", "Hilfe")]}),
    ]
    wanted = SplitSizes(test_pairs=2, valid_pairs=2, package_max=4)
    assert assign_splits({"alpha": 6, "beta": 4, "gamma": 2}, wanted) == {
        "alpha": "train", "gamma": "test", "beta": "valid"}
    out = tmp_path / "corpus"
    build_corpus(sources, cache, out, wanted)
    assert _lines(out / "valid.en.gz") == ["Show all", "Zoom in", "Quit"]
    assert _lines(out / "valid.de.gz") == ["Alle zeigen", "Vergrößern", "Beenden"]
    assert write_as_written(out, cache, "valid") == (3, 0)
    assert write_as_written(out, cache, "test") == (2, 0)
    assert [(r["source"], r["target"], r["package"], r["catalog"]) for r in read_as_written(out / "valid.as_written.jsonl.gz")] == [
        ("Show\nall\n", "Alle\nzeigen\n", "beta", "beta.mo"), ("Zoom  in", "Vergrößern", "beta", "beta.mo"),
        ("_Quit", "_Beenden", "beta", "beta.mo")]
    assert [r["source"] for r in read_as_written(out / "test.as_written.jsonl.gz")] == ["  -v   be  verbose\n", "Help"]
    first = (out / "test.as_written.jsonl.gz").read_bytes()
    write_as_written(out, cache, "test")
    assert (out / "test.as_written.jsonl.gz").read_bytes() == first     # the same packages give the same bytes
    assert [s.package for s in sources_of(sources, out)] == ["beta", "gamma"]
    # A cache whose catalog lost an entry (not the pinned package) leaves that pair out, and says so.
    _cached(cache, "gamma", "gamma", {"gamma.mo": [("Help", "Hilfe")]})
    assert write_as_written(out, cache, "test") == (1, 1)
    assert corpus_main(["as-written", "--sources", str(tmp_path / "s.tsv"), "--cache", str(cache),
                        "--corpus", str(out)]) == 2


def test_the_committed_corpus_readme_is_what_a_rebuild_writes():
    corpus = Path(__file__).resolve().parents[2] / "data" / "debian_catalogs"
    stats = json.loads((corpus / "stats.json").read_text(encoding="utf-8"))
    rows = [line.split("\t") for line in (corpus / "packages.tsv").read_text(encoding="utf-8").splitlines()]
    assert render_readme(stats, [dict(zip(rows[0], row)) for row in rows[1:]]) == (corpus / "README.md").read_text(
        encoding="utf-8")
