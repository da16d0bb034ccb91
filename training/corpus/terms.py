"""Short messages that the catalogs of many packages translate alike, as a translation memory.

A UI string such as "Search Results", "Subject" or "Former maintainer" is translated the same way
by package after package ("Suchergebnisse", "Betreff", "Ehemaliger Betreuer"), yet the software
models, given two or three words without context, get a fair share of them wrong
("Ergebnisse suchen", "Subject", "Formerbetreuer"). The corpus cannot say which translation is the
usual one: it keeps one pair per distinct translation (training/corpus/build.py removes duplicates).
The catalogs can: here every message of at most MAX_WORDS words of the train split's packages
(normalised and cleaned as the corpus is: training/corpus/clean.py; an untranslated copy that may
be a kept name counts as a translation by itself) votes for its translation once per package, and
a message whose most-voted translation has at least MIN_PACKAGES packages, more than any other
translation, and at least MIN_SHARE of the packages that translate the message, is written to a TMX file
the service answers whole segments from (service/memory.py), e.g. memories/debian-terms.tmx.

The packages vote the other way too, on the English of every German message, by the same rule: the
usual English of "Abbrechen" is "Cancel", though "Abort" is the usual German of "Abort" too. A pair
agreed both ways is one unit serving both directions; one agreed one way only names the language it
serves from (TMX's `srclang` on its `<tu>`, which service/memory.py honours).

Only the train split's packages vote, and no message whose English (or, for De->En, German) is in a
valid or test split of the corpus (by near key) is written, nor a De->En answer whose English is, so
the splits stay unseen.

`write_short` writes, per valid and test split, what measures the memory
(benchmarks/terms_memory.py): every message of at most MAX_WORDS words of the split's packages, in
their order, including those the corpus' deduplication took out of the split because the train split
has them (the ones a memory of train packages can answer): `SPLIT.short.jsonl.gz`, JSON lines
`{"source", "target", "package", "written"}` (a package's pair once), normalised as the corpus is, and
the msgid and msgstr of its first entry as the catalog writes them (`"written"`: an accelerator kept).
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

from training.corpus.as_written import split_packages
from training.corpus.build import excluded_keys, write_gzip
from training.corpus.catalog import CatalogError, read_catalog
from training.corpus.clean import may_be_kept_identical, near_key, normalise, rejection, strip_accelerators
from training.corpus.tmx import write_tmx

MAX_WORDS = 4
MIN_PACKAGES = 2
MIN_SHARE = 0.5     # chosen on the validation packages: results/terms_memory.md
UNTRANSLATED = "untranslated copy"


def short_pairs(directory: Path) -> Iterator[tuple[str, str]]:
    """The cleaned (English, German) pairs of at most MAX_WORDS English words of one cached package,
    in catalog and entry order; an untranslated copy only where it may be a kept name."""
    for en, de, _, _ in _short_entries(directory):
        yield en, de


def _short_entries(directory: Path) -> Iterator[tuple[str, str, str, str]]:
    """short_pairs' pairs, each with the msgid and msgstr it was cleaned from."""
    fetched = json.loads((directory / "fetched.json").read_text(encoding="utf-8"))
    for path in fetched["catalogs"]:
        try:
            catalog = read_catalog((directory / path).read_bytes())
        except CatalogError:
            continue
        for msgid, msgstr in catalog.entries:
            en, de = strip_accelerators(normalise(msgid), normalise(msgstr))
            if len(en.split()) > MAX_WORDS:
                continue
            reason = rejection(en, de)
            if reason is None or (reason == UNTRANSLATED and may_be_kept_identical(en)):
                yield en, de, msgid, msgstr


def votes(packages: Iterable[Iterable[tuple[str, str]]]) -> tuple[dict[str, Counter[str]], dict[str, Counter[str]]]:
    """English -> German translation -> the number of packages that give it (each package once),
    and German -> English message -> the same."""
    english: dict[str, Counter[str]] = defaultdict(Counter)
    german: dict[str, Counter[str]] = defaultdict(Counter)
    for pairs in packages:
        for en, de in set(pairs):
            english[en][de] += 1
            german[de][en] += 1
    return english, german


def agreed(found: dict[str, Counter[str]], excluded: set[str], min_packages: int = MIN_PACKAGES,
           min_share: float = MIN_SHARE) -> list[tuple[str, str, int, int]]:
    """(message, translation, packages giving it, packages translating the message), messages
    sorted: those whose usual translation the packages agree on (see the module's docstring), none
    whose near key is `excluded`. Read either way: `found` is one of `votes`' two."""
    kept = []
    for message in sorted(found):
        ranked = found[message].most_common()
        translation, count = ranked[0]
        total = sum(found[message].values())
        if (count >= min_packages and count >= min_share * total and (len(ranked) == 1 or ranked[1][1] < count)
                and near_key(message) not in excluded):
            kept.append((message, translation, count, total))
    return kept


def units(english: list[tuple[str, str, int, int]], german: list[tuple[str, str, int, int]]
          ) -> list[tuple[str, str, str | None]]:
    """(English, German, the one language the unit serves from or None for both), sorted: a pair
    agreed both ways is one unit for both directions."""
    forward = {(en, de) for en, de, _, _ in english}
    backward = {(en, de) for de, en, _, _ in german}
    return sorted((en, de, None if (en, de) in forward and (en, de) in backward else ("en" if (en, de) in forward else "de"))
                  for en, de in forward | backward)


def build_terms(corpus: Path, cache: Path, memory: Path, min_packages: int = MIN_PACKAGES,
                min_share: float = MIN_SHARE) -> str:
    """Writes the memory from the train split's cached packages, and SPLIT.short.jsonl.gz."""
    english, german = votes(short_pairs(cache / package) for package in split_packages(corpus, "train"))
    excluded = excluded_keys([corpus])
    en_de = agreed(english, excluded, min_packages, min_share)
    de_en = agreed(german, excluded_keys([corpus], "de"), min_packages, min_share)
    de_en = [row for row in de_en if near_key(row[1]) not in excluded]  # nor a valid or test English as an answer
    kept = units(en_de, de_en)
    count = write_tmx(memory, ((f"{k + 1}", {"en": en, "de": de}) for k, (en, de, _) in enumerate(kept)), "*all*",
                      f"The usual translation of short messages, En->De and De->En, agreed by at least "
                      f"{min_packages} of the train split's packages of data/debian_catalogs (training/corpus/terms.py); "
                      "each package's licence: data/debian_catalogs/packages.tsv",
                      {f"{k + 1}": only_from for k, (_, _, only_from) in enumerate(kept) if only_from})
    said = [f"{memory}: {count} units: en->de {len(en_de)}, de->en {len(de_en)} messages "
            f"({len(english)} English and {len(german)} German short messages voted on)"]
    for split in ("valid", "test"):
        rows = write_short(corpus, cache, split)
        said.append(f"{corpus / f'{split}.short.jsonl.gz'}: {rows} messages")
    return "\n".join(said)


def write_short(corpus: Path, cache: Path, split: str) -> int:
    rows = []
    for package in split_packages(corpus, split):
        first: dict[tuple[str, str], tuple[str, str]] = {}
        for en, de, msgid, msgstr in _short_entries(cache / package):
            first.setdefault((en, de), (msgid, msgstr))
        rows += [json.dumps({"source": en, "target": de, "package": package, "written": list(written)},
                            ensure_ascii=False) for (en, de), written in first.items()]
    write_gzip(corpus / f"{split}.short.jsonl.gz", rows)
    return len(rows)
