"""The valid and test splits' messages as their catalogs write them.

The corpus' pairs are normalised (whitespace runs one space, a keyboard accelerator removed), so
the splits score a model on text no client sends: a command's help comes with its line breaks and
columns, a menu label with its `_` or `&`. The service takes text as written (service/layout.py,
service/protection/), and what it makes of it is measured on these files
(`benchmarks/as_written.py`): for every pair of a split, in the split's order, the catalog entry it
was cleaned from, read again from the same pinned package (`SPLIT.as_written.jsonl.gz`, JSON lines
`{"source", "target", "package", "catalog"}`).

Where several entries of one catalog clean to the same pair ("Open" and "_Open"), the first in the
catalog's order is taken: the build kept that one too (training/corpus/build.py keeps the first of
exact duplicates).
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path, PurePosixPath
from typing import Sequence

from training.corpus.archive import Source
from training.corpus.build import read_jsonl_gzip, write_gzip
from training.corpus.catalog import CatalogError, read_catalog
from training.corpus.clean import normalise, strip_accelerators

SPLITS = ("valid", "test")


def file_name(split: str) -> str:
    return f"{split}.as_written.jsonl.gz"


def split_packages(corpus: Path, split: str) -> list[str]:
    """The packages a split's pairs come from (its origin file's first column), sorted."""
    with gzip.open(corpus / f"{split}.origin.gz", "rt", encoding="utf-8") as handle:
        return sorted({line.split("\t", 1)[0] for line in handle.read().splitlines()})


def _written_entries(directory: Path) -> dict[tuple[str, tuple[str, str]], tuple[str, str]]:
    """(catalog name, cleaned pair) -> the first (msgid, msgstr) of a cached package cleaning to it."""
    fetched = json.loads((directory / "fetched.json").read_text(encoding="utf-8"))
    found: dict[tuple[str, tuple[str, str]], tuple[str, str]] = {}
    for path in fetched["catalogs"]:
        try:
            catalog = read_catalog((directory / path).read_bytes())
        except CatalogError:
            continue
        name = PurePosixPath(path).name
        for msgid, msgstr in catalog.entries:
            found.setdefault((name, strip_accelerators(normalise(msgid), normalise(msgstr))), (msgid, msgstr))
    return found


def write_as_written(corpus: Path, cache: Path, split: str) -> tuple[int, int]:
    """Writes corpus/SPLIT.as_written.jsonl.gz from the cached packages; returns (pairs written,
    pairs of the split whose entry was not found: a cache that is not the pinned packages')."""
    def lines(suffix: str) -> list[str]:
        with gzip.open(corpus / f"{split}.{suffix}.gz", "rt", encoding="utf-8") as handle:
            return handle.read().splitlines()

    entries = {package: _written_entries(cache / package) for package in split_packages(corpus, split)}
    rows, missing = [], 0
    for en, de, origin in zip(lines("en"), lines("de"), lines("origin")):
        package, catalog = origin.split("\t")
        written = entries[package].get((catalog, (en, de)))
        if written is None:
            missing += 1
            continue
        rows.append(json.dumps({"source": written[0], "target": written[1], "package": package, "catalog": catalog},
                               ensure_ascii=False))
    write_gzip(corpus / file_name(split), rows)  # the same packages give the same bytes
    return len(rows), missing


def read_as_written(path: Path) -> list[dict[str, str]]:
    return read_jsonl_gzip(path)


def sources_of(sources: Sequence[Source], corpus: Path, splits: Sequence[str] = SPLITS) -> list[Source]:
    """The pinned packages the splits' pairs come from."""
    wanted = {package for split in splits for package in split_packages(corpus, split)}
    return [source for source in sources if source.package in wanted]
