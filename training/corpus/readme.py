"""The corpus directory's README.md, written by the build from what it built (so a rebuild writes
the same file)."""
from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from training.corpus.archive import HELD_OUT

TEMPLATE = """# Debian's German gettext catalogs: an En-De corpus of software messages

Built by `python -m training.corpus build --sources data/debian_catalogs/sources.tsv --cache CACHE
--out data/debian_catalogs` (training/corpus/; the commands and the choices are in its docstrings).
Every file here but the alignment labels and the as-written files (below) is written by that
command: a rebuild from `sources.tsv` gives the same bytes. `train.en-de.align.gz` (eflomal's word
links of every training pair, both directions, grow-diag-final-and; the labels of the software
model's alignment head) and its `train.en-de.align.json` are written by `python -m
training.alignment_labels --data-dir data/debian_catalogs --split train --source en --target de`
(161 s on 2 cores; eflomal has no seed, so a rebuild differs a little).

## Sources

The binary packages of Debian 12 "bookworm" (main, amd64 and all) that ship a German catalog
(`.../locale/de/LC_MESSAGES/*.mo` or `de_DE`), as the archive's Contents index lists them
(`python -m training.corpus select --contents Contents-all.gz Contents-amd64.gz`, from
http://deb.debian.org/debian/dists/bookworm/main/), each pinned to the version apt offered on
2026-11-26 (`sources.tsv`: package, version, architecture, source package, size, SHA-256, pool
path). A rebuild downloads exactly those files (`apt-get download package=version`, or with
`--mirror http://snapshot.debian.org/archive/debian/TIMESTAMP` once a version has left the live
mirror) and refuses any whose SHA-256 differs.

Held out for outside evaluation and never read: {held_out}.

## What is kept

Every .mo catalog is read with the standard library (training/corpus/catalog.py). Kept: singular
msgid/msgstr pairs; a msgctxt is removed (the pair is kept); plural entries and empty msgstrs are
skipped. A .mo has no fuzzy entries (msgfmt leaves them out), so none can be skipped here: fuzzy
translations never reach the binary packages. Normalised: Unicode NFC, whitespace runs (the
catalogs' line breaks included) one space, a keyboard accelerator marker (`_Open`/`Ö_ffnen`,
`&File`/`&Datei`) removed when each side has exactly one. Dropped: translator credits, sides
without a letter, untranslated copies, sides over 500 characters, a length ratio over 3
(characters + 10 each side), pairs whose placeholders differ (printf conversions without their
position, `{{name}}`, `{{0}}`, `${{VAR}}`), exact and near duplicates (case-folded letters and
digits of both sides) within a split.

An identical pair is not always an untranslated copy: German keeps names, codes and units
("Afghanistan", "ISDN", "80 kbit/s"), and a model that never saw one kept changes them. So the
identical pairs of at most 4 words, none an English function word ("the", "of", "is": a phrase
a translator left in English), whose English (near key) no catalog of the archive translates
otherwise, are kept apart in `SPLIT.identical.*` (once each; valid and test without those of an
earlier split), outside the splits above, which stay translations. A recipe mixes
`train.identical` in (`train_mix`); `benchmarks/identical.py` scores how many of
`test.identical` a model leaves alone.

Split by source package (a source package's binaries share catalogs): source packages in the
order of the SHA-256 of their name; test, then valid, take packages of at most 600 clean pairs
until they hold 5,000 and 3,000 pairs; the rest is train. Then valid loses the pairs whose English
(near key) train has, and test those that train or valid have: the test split is strings the
model never saw, from packages it never saw.

## Counts

| | train | valid | test |
|---|---:|---:|---:|
| pairs | {train} | {valid} | {test} |
| source packages | {src_train} | {src_valid} | {src_test} |
| identical pairs, kept apart | {identical_train} | {identical_valid} | {identical_test} |

{packages} packages pinned, {with_pairs} with pairs in the corpus; {catalogs} catalogs, {entries}
singular entries with a translation read ({context} of them had a msgctxt, removed). Left out:

| reason | entries |
|---|---:|
{dropped}

## Files

- `{{train,valid,test}}.{{en,de}}.gz`: line-parallel, one message a line (the layout `training`
  reads: recipes name `data_dir` `data/debian_catalogs`, splits `train` and `valid`).
- `{{train,valid,test}}.origin.gz`: per line, the package and the catalog the pair came from.
- `{{train,valid,test}}.identical.{{en,de,origin}}.gz`: the identical pairs kept apart, in the same
  layout (recipes name the split `train.identical`).
- `packages.tsv`: per package its version, source package, split, catalogs, entries, pairs kept
  and licence.
- `sources.tsv`: the pinned packages, to rebuild exactly. `stats.json`: the counts above.
- `{{valid,test}}.as_written.jsonl.gz`: each pair of the split as its catalog writes it (line breaks,
  columns, accelerators), with its package and catalog; written by `python -m training.corpus
  as-written --sources data/debian_catalogs/sources.tsv --cache CACHE --corpus data/debian_catalogs`
  (training/corpus/as_written.py), read by `benchmarks/as_written.py`.
- `{{valid,test}}.short.jsonl.gz`: every message of at most four words of the split's packages, a package's
  pair once, those the train split has too included (the splits above drop them); written by `python -m
  training.corpus terms ... --corpus data/debian_catalogs --tmx memories/debian-terms.tmx`
  (training/corpus/terms.py), read by `benchmarks/terms_memory.py`.

## Licences

Each pair keeps its package's licence: `packages.tsv` names it, read from the package's
`/usr/share/doc/PACKAGE/copyright` (the licence of the DEP-5 stanza that covers `po/de.po`, the
last match; else the licence its text names first; a package whose doc directory is a link names
the package whose copyright file applies). The translations are their translators' work under those
licences; redistributing the corpus means keeping them. Packages with pairs by licence (the most
common):

| licence | packages | pairs |
|---|---:|---:|
{licences}

## Caveats

- Messages are shared between packages that are not held out and those that are (gnulib's
  messages are in many GNU packages' catalogs, GLib's in many GNOME ones): an outside evaluation on
  the held-out packages meets some strings the corpus has.
- Game and application content (item descriptions, tips) is in the catalogs as much as UI
  strings are; both are kept.
"""


def _number(n: int) -> str:
    return f"{n:,}"


def render_readme(stats: dict[str, Any], rows: Sequence[dict[str, str]]) -> str:
    by_licence: Counter[str] = Counter()
    pairs_by_licence: Counter[str] = Counter()
    for row in rows:
        if int(row["pairs"]):
            by_licence[row["licence"]] += 1
            pairs_by_licence[row["licence"]] += int(row["pairs"])
    licences = "\n".join(f"| {name} | {count} | {_number(pairs_by_licence[name])} |"
                         for name, count in by_licence.most_common(15))
    rest = len(by_licence) - min(15, len(by_licence))
    if rest:
        others = sum(c for n, c in by_licence.items() if n not in dict(by_licence.most_common(15)))
        licences += f"\n| {rest} other licence names | {others} | |"
    dropped = "\n".join(f"| {reason} | {_number(n)} |" for reason, n in stats["dropped"].items())
    return TEMPLATE.format(
        held_out=", ".join(sorted(HELD_OUT)), train=_number(stats["pairs"]["train"]),
        valid=_number(stats["pairs"]["valid"]), test=_number(stats["pairs"]["test"]),
        src_train=stats["source_packages"]["train"], src_valid=stats["source_packages"]["valid"],
        src_test=stats["source_packages"]["test"],
        identical_train=_number(stats["identical"]["train"]), identical_valid=_number(stats["identical"]["valid"]),
        identical_test=_number(stats["identical"]["test"]), packages=_number(stats["packages"]),
        with_pairs=_number(stats["packages_with_pairs"]), catalogs=_number(stats["catalogs"]),
        entries=_number(stats["entries"]), context=_number(stats["msgctxt_removed"]), dropped=dropped, licences=licences)
