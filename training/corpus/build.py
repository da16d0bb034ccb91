"""From the cached catalogs to the committed corpus: pairs, cleaning, split by source package,
duplicates, files.

Split: source packages (a source package's binaries share catalogs, so a binary-package split
would put the same strings on both sides) are ordered by the SHA-256 of their name, a fixed
shuffle; test, then valid, take packages of at most `package_max` clean pairs in that order
until they hold `test_pairs` and `valid_pairs` (SplitSizes), and every other package is train. Duplicates: within
a split a pair is kept once (exactly, then by the near keys of both sides); valid loses the pairs
whose English near key is in train, test those whose key is in train or valid, so that the test
split scores strings the model never saw in packages it never saw.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Sequence

from training.corpus.archive import Source, licence_of
from training.corpus.catalog import CatalogError, read_catalog
from training.corpus.clean import may_be_kept_identical, near_key, normalise, rejection, strip_accelerators
from training.corpus.readme import render_readme

SPLITS = ("train", "valid", "test")
CONTEXT_REMOVED = "msgctxt removed"   # counted with the reasons, reported apart: those pairs are kept
UNTRANSLATED = "untranslated copy"
IDENTICAL = "identical"   # SPLIT.identical.{en,de,origin}.gz: the identical pairs kept apart


@dataclass(frozen=True)
class SplitSizes:
    test_pairs: int = 5000
    valid_pairs: int = 3000
    package_max: int = 600     # a larger package goes to train: no few packages make up the test set


@dataclass(frozen=True)
class Pair:
    source: str
    target: str
    package: str
    catalog: str    # the catalog's file name in its package


@dataclass
class PackageRecord:
    source: Source
    catalogs: int = 0
    entries: int = 0     # singular, non-empty entries read
    kept: int = 0        # pairs left in the corpus
    licence: str = ""
    split: str = ""


def package_pairs(source: Source, directory: Path,
                  counts: Counter[str]) -> tuple[list[Pair], list[Pair], PackageRecord]:
    """The clean pairs of one cached package and its untranslated copies that may be kept
    (`may_be_kept_identical`), in catalog and entry order; counts what was dropped (those copies not:
    the build decides on them)."""
    fetched = json.loads((directory / "fetched.json").read_text(encoding="utf-8"))
    record = PackageRecord(source, catalogs=len(fetched["catalogs"]))
    pairs: list[Pair] = []
    identical: list[Pair] = []
    for path in fetched["catalogs"]:
        try:
            catalog = read_catalog((directory / path).read_bytes())
        except CatalogError:
            counts["catalog unreadable"] += 1
            continue
        counts["plural entries (skipped)"] += catalog.plural
        counts["empty msgstr (skipped)"] += catalog.empty
        counts["not in the header's charset"] += catalog.undecodable
        counts[CONTEXT_REMOVED] += catalog.with_context
        record.entries += len(catalog.entries)
        for msgid, msgstr in catalog.entries:
            en, de = strip_accelerators(normalise(msgid), normalise(msgstr))
            reason = rejection(en, de)
            if reason == UNTRANSLATED and may_be_kept_identical(en):
                identical.append(Pair(en, de, source.package, PurePosixPath(path).name))
                continue
            if reason is not None:
                counts[reason] += 1
                continue
            pairs.append(Pair(en, de, source.package, PurePosixPath(path).name))
    record.licence = _licence(source.package, directory, fetched.get("doc_link"))
    return pairs, identical, record


def _licence(package: str, directory: Path, doc_link: str | None) -> str:
    own = directory / "usr" / "share" / "doc" / package / "copyright"
    if own.is_file():
        return licence_of(own.read_text(encoding="utf-8", errors="replace"))
    if doc_link:
        other = PurePosixPath(doc_link).name
        linked = directory.parent / other / "usr" / "share" / "doc" / other / "copyright"
        if linked.is_file():
            return licence_of(linked.read_text(encoding="utf-8", errors="replace"))
        return f"see the copyright file of {other}"
    return "no copyright file in the package"


def assign_splits(sizes: dict[str, int], wanted: SplitSizes = SplitSizes()) -> dict[str, str]:
    """{source package: split} from the clean pair count of each source package."""
    order = sorted(sizes, key=lambda name: hashlib.sha256(name.encode()).hexdigest())
    split_of = {}
    held = {"test": 0, "valid": 0}
    for name in order:
        split = "train"
        for candidate, pairs in (("test", wanted.test_pairs), ("valid", wanted.valid_pairs)):
            if held[candidate] < pairs and 0 < sizes[name] <= wanted.package_max:
                split = candidate
                held[candidate] += sizes[name]
                break
        split_of[name] = split
    return split_of


def deduplicate(by_split: dict[str, list[Pair]], counts: Counter[str]) -> dict[str, list[Pair]]:
    out: dict[str, list[Pair]] = {}
    seen_sources: set[str] = set()
    for split in SPLITS:
        exact: set[tuple[str, str]] = set()
        near: set[tuple[str, str]] = set()
        kept = []
        for pair in by_split[split]:
            key = (near_key(pair.source), near_key(pair.target))
            if (pair.source, pair.target) in exact:
                counts["exact duplicate"] += 1
            elif key in near:
                counts["near duplicate"] += 1
            elif split != "train" and key[0] in seen_sources:
                counts[f"{split}: English also in an earlier split"] += 1
            else:
                exact.add((pair.source, pair.target))
                near.add(key)
                kept.append(pair)
        seen_sources.update(near_key(p.source) for p in kept)
        out[split] = kept
    return out


def keep_identical(by_split: dict[str, list[Pair]], translated: set[str],
                   counts: Counter[str]) -> dict[str, list[Pair]]:
    """The identical pairs kept apart, per split: those whose English (near key) no catalog of the
    archive translates otherwise (`translated`: the near keys of every clean pair, before the
    splits were deduplicated), once each, and in valid and test only those that no earlier split's
    identical pairs hold; the others are counted as untranslated copies or duplicates."""
    out: dict[str, list[Pair]] = {}
    seen: set[str] = set()
    for split in SPLITS:
        keys: set[str] = set()
        kept = []
        for pair in by_split[split]:
            key = near_key(pair.source)
            if key in translated:
                counts[UNTRANSLATED] += 1
            elif key in keys or key in seen:
                counts["identical: duplicate"] += 1
            else:
                keys.add(key)
                kept.append(pair)
        seen |= keys
        out[split] = kept
    return out


def excluded_keys(corpora: Sequence[Path], language: str = "en") -> set[str]:
    """The near keys of the English (or `language`) side of every valid and test file (translations
    and identical pairs) of these corpus directories."""
    keys: set[str] = set()
    for corpus in corpora:
        for path in sorted(corpus.glob(f"*.{language}.gz")):
            if path.name.split(".")[0] in ("valid", "test"):
                with gzip.open(path, "rt", encoding="utf-8") as handle:
                    keys.update(near_key(line.rstrip("\n")) for line in handle)
    return keys


def read_jsonl_gzip(path: Path) -> list[dict]:
    """The JSON objects of a gzipped JSON-lines file, one a line."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle.read().splitlines()]


def write_gzip(path: Path, lines: Sequence[str]) -> None:
    # mtime 0 and no file name in the header: the same corpus gives the same bytes.
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as handle:
        handle.write("".join(line + "\n" for line in lines).encode("utf-8"))
    path.write_bytes(buffer.getvalue())


def build_corpus(sources: Sequence[Source], cache: Path, out: Path, sizes_wanted: SplitSizes = SplitSizes()) -> str:
    counts: Counter[str] = Counter()
    records: dict[str, PackageRecord] = {}
    pairs_of: dict[str, list[Pair]] = {}
    identical_of: dict[str, list[Pair]] = {}
    for source in sorted(sources, key=lambda s: s.package):
        pairs, identical, record = package_pairs(source, cache / source.package, counts)
        records[source.package] = record
        pairs_of[source.package] = pairs
        identical_of[source.package] = identical
    sizes: Counter[str] = Counter()
    for package, pairs in pairs_of.items():
        sizes[records[package].source.source] += len(pairs)
    split_of = assign_splits(dict(sizes), sizes_wanted)
    by_split: dict[str, list[Pair]] = {split: [] for split in SPLITS}
    identical_by_split: dict[str, list[Pair]] = {split: [] for split in SPLITS}
    for package, pairs in pairs_of.items():
        records[package].split = split_of[records[package].source.source]
        by_split[records[package].split] += pairs
        identical_by_split[records[package].split] += identical_of[package]
    translated = {near_key(pair.source) for pairs in pairs_of.values() for pair in pairs}
    identical = keep_identical(identical_by_split, translated, counts)
    kept = deduplicate(by_split, counts)

    out.mkdir(parents=True, exist_ok=True)
    for split, pairs in kept.items():
        write_gzip(out / f"{split}.en.gz", [p.source for p in pairs])
        write_gzip(out / f"{split}.de.gz", [p.target for p in pairs])
        write_gzip(out / f"{split}.origin.gz", [f"{p.package}\t{p.catalog}" for p in pairs])
        for p in pairs:
            records[p.package].kept += 1
    for split, pairs in identical.items():
        write_gzip(out / f"{split}.{IDENTICAL}.en.gz", [p.source for p in pairs])
        write_gzip(out / f"{split}.{IDENTICAL}.de.gz", [p.target for p in pairs])
        write_gzip(out / f"{split}.{IDENTICAL}.origin.gz", [f"{p.package}\t{p.catalog}" for p in pairs])
    rows = ["package\tversion\tsource\tsplit\tcatalogs\tentries\tpairs\tlicence"]
    for package, r in sorted(records.items()):
        rows.append(f"{package}\t{r.source.version}\t{r.source.source}\t{r.split}\t{r.catalogs}\t{r.entries}"
                    f"\t{r.kept}\t{r.licence}")
    (out / "packages.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    stats = {
        "packages": len(records),
        "packages_with_pairs": sum(1 for r in records.values() if r.kept),
        "source_packages": {split: sum(1 for name, s in split_of.items() if s == split and sizes[name])
                            for split in SPLITS},
        "catalogs": sum(r.catalogs for r in records.values()),
        "entries": sum(r.entries for r in records.values()),
        "pairs": {split: len(pairs) for split, pairs in kept.items()},
        "identical": {split: len(pairs) for split, pairs in identical.items()},
        "msgctxt_removed": counts.pop(CONTEXT_REMOVED, 0),
        "dropped": dict(sorted(counts.items())),
    }
    (out / "stats.json").write_text(json.dumps(stats, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    header = rows[0].split("\t")
    (out / "README.md").write_text(render_readme(stats, [dict(zip(header, r.split("\t"))) for r in rows[1:]]),
                                   encoding="utf-8")
    return (f"{sum(stats['pairs'].values())} pairs from {stats['packages_with_pairs']} packages "
            f"(train {stats['pairs']['train']}, valid {stats['pairs']['valid']}, test {stats['pairs']['test']}) in {out}")
