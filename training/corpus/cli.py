"""`python -m training.corpus`: build the En-De software corpus from Debian's German catalogs.

    python -m training.corpus select --contents Contents-all.gz Contents-amd64.gz \\
        --sources data/debian_catalogs/sources.tsv          # choose and pin the packages
    python -m training.corpus fetch --sources data/debian_catalogs/sources.tsv --cache /tmp/catalogs
    python -m training.corpus build --sources data/debian_catalogs/sources.tsv --cache /tmp/catalogs \\
        --out data/debian_catalogs                           # fetch what is missing, clean, split, write
    python -m training.corpus as-written --sources data/debian_catalogs/sources.tsv --cache /tmp/catalogs \
        --corpus data/debian_catalogs                        # the valid and test messages as written
    python -m training.corpus names --out data/cldr_names --exclude data/debian_catalogs
                                                             # CLDR's names of countries, languages, ...
    python -m training.corpus terms --sources data/debian_catalogs/sources.tsv --cache /tmp/catalogs \
        --corpus data/debian_catalogs --tmx memories/debian-terms.tmx
                                                             # short messages the packages translate alike

The Contents index is the archive's (http://deb.debian.org/debian/dists/bookworm/main/Contents-all.gz
and Contents-amd64.gz for the bookworm apt here is configured for). `build` with the committed
sources list rebuilds the committed corpus exactly (every .deb is checked against its SHA-256).
Errors end with exit code 2 and one line on stderr.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from training.usage import OneLineParser, UsageError

if TYPE_CHECKING:
    from training.corpus.archive import Source

PROG = "python -m training.corpus"


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROG, description="The En-De corpus of Debian's German gettext catalogs.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    s = sub.add_parser("select", help="packages with German catalogs from Contents indices, pinned by apt")
    s.add_argument("--contents", type=Path, nargs="+", required=True, help="Contents-*.gz of the release")
    s.add_argument("--sources", type=Path, required=True, help="the sources list to write")
    for name, text in (("fetch", "download the pinned packages and keep their catalogs"),
                       ("build", "fetch what is missing, then clean, split and write the corpus")):
        c = sub.add_parser(name, help=text)
        c.add_argument("--sources", type=Path, required=True, help="the sources list (select writes it)")
        c.add_argument("--cache", type=Path, required=True, help="where the catalogs of each package are kept")
        c.add_argument("--mirror", help="fetch pool files from this mirror instead of apt-get download, e.g. "
                                        "http://snapshot.debian.org/archive/debian/20250520T000000Z")
        c.add_argument("--workers", type=int, default=2, help="batches of packages fetched at once")
        if name == "build":
            c.add_argument("--out", type=Path, required=True, help="the corpus directory to write")
    w = sub.add_parser("as-written", help="the valid and test pairs as their catalogs write them "
                                          "(SPLIT.as_written.jsonl.gz; fetches only those packages)")
    w.add_argument("--sources", type=Path, required=True, help="the sources list the corpus was built from")
    w.add_argument("--cache", type=Path, required=True, help="where the catalogs of each package are kept")
    w.add_argument("--corpus", type=Path, required=True, help="the corpus directory (build's --out)")
    w.add_argument("--mirror", help="as for fetch")
    w.add_argument("--workers", type=int, default=2, help="batches of packages fetched at once")
    t = sub.add_parser("terms", help="the short messages the train split's packages translate alike, as a "
                                     "translation memory, and SPLIT.short.jsonl.gz (training/corpus/terms.py)")
    t.add_argument("--sources", type=Path, required=True, help="the sources list the corpus was built from")
    t.add_argument("--cache", type=Path, required=True, help="where the catalogs of each package are kept")
    t.add_argument("--corpus", type=Path, required=True, help="the corpus directory (build's --out)")
    t.add_argument("--tmx", type=Path, required=True, help="the memory to write, e.g. memories/debian-terms.tmx")
    t.add_argument("--min-packages", type=int, default=2, help="packages that must give the translation")
    t.add_argument("--min-share", type=float, default=0.5,
                   help="the share of the packages translating the message that must give it")
    t.add_argument("--mirror", help="as for fetch")
    t.add_argument("--workers", type=int, default=2, help="batches of packages fetched at once")
    n = sub.add_parser("names", help="CLDR's English and German names of countries, languages, scripts, "
                                     "currencies, time zones, months and weekdays (training/corpus/names.py)")
    n.add_argument("--out", type=Path, required=True, help="the directory to write")
    n.add_argument("--exclude", type=Path, nargs="*", default=[],
                   help="corpus directories whose valid and test English no name may be")
    n.add_argument("--tmx", type=Path, help="also write every name as a translation memory the service serves "
                                            "(service/memory.py), e.g. memories/cldr-names.tmx")
    return parser


def run(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    from training.corpus.archive import read_sources, select_packages, write_sources

    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    if args.command == "select":
        missing = [str(p) for p in args.contents if not p.is_file()]
        if missing:
            raise UsageError(f"--contents: no such file: {', '.join(missing)}")
        sources, unknown = select_packages(args.contents)
        args.sources.parent.mkdir(parents=True, exist_ok=True)
        write_sources(args.sources, sources)
        say(f"{len(sources)} packages pinned in {args.sources}"
            + (f"; apt knows no version of {len(unknown)}: {' '.join(unknown)}" if unknown else ""))
        return 0
    if args.command == "names":
        missing = [str(p) for p in args.exclude if not p.is_dir()]
        if missing:
            raise UsageError(f"--exclude: no such directory: {', '.join(missing)}")
        try:
            from training.corpus.names import build_names
        except ImportError as error:
            raise UsageError(f"{error.name} is not installed: pip install -e .") from None
        say(build_names(args.out, args.exclude, args.tmx))
        return 0
    if not args.sources.is_file():
        raise UsageError(f"--sources: no such file: {args.sources}")
    if args.workers < 1:
        raise UsageError("--workers must be >= 1")
    try:
        sources = read_sources(args.sources)
    except ValueError as error:
        raise UsageError(str(error)) from None
    from training.corpus.fetch import fetch_all

    if args.command == "as-written":
        return _as_written(args, sources, say)
    if args.command == "terms":
        return _terms(args, sources, say)
    failures = fetch_all(sources, args.cache, workers=args.workers, mirror=args.mirror, say=say)
    if args.command == "fetch":
        say(f"{len(sources) - len(failures)} of {len(sources)} packages in {args.cache}")
        return 1 if failures else 0
    if failures:
        raise UsageError(f"{len(failures)} packages could not be fetched (first: "
                         f"{next(iter(failures.items()))}); the corpus would not be the one the list pins")
    from training.corpus.build import build_corpus

    summary = build_corpus(sources, args.cache, args.out)
    say(summary)
    return 0


def _fetch_splits(args: argparse.Namespace, sources: list[Source], splits: Sequence[str],
                  say: Callable[[str], None]) -> None:
    """Fetches the pinned packages the corpus' `splits` come from into --cache; a corpus without one
    of those splits, or a package that cannot be fetched, is a UsageError."""
    from training.corpus.as_written import sources_of
    from training.corpus.fetch import fetch_all

    absent = [str(args.corpus / f"{split}.origin.gz") for split in splits
              if not (args.corpus / f"{split}.origin.gz").is_file()]
    if absent:
        raise UsageError(f"--corpus: no such file: {', '.join(absent)}")
    failures = fetch_all(sources_of(sources, args.corpus, splits), args.cache, workers=args.workers,
                         mirror=args.mirror, say=say)
    if failures:
        raise UsageError(f"{len(failures)} packages could not be fetched (first: {next(iter(failures.items()))})")


def _as_written(args: argparse.Namespace, sources: list[Source], say: Callable[[str], None]) -> int:
    from training.corpus.as_written import SPLITS, file_name, write_as_written

    _fetch_splits(args, sources, SPLITS, say)
    for split in SPLITS:
        written, missing = write_as_written(args.corpus, args.cache, split)
        say(f"{args.corpus / file_name(split)}: {written} messages"
            + (f"; {missing} pairs had no entry in the cached catalogs" if missing else ""))
        if missing:
            raise UsageError(f"{missing} {split} pairs have no entry in {args.cache}: not the packages "
                             f"the corpus was built from")
    return 0


def _terms(args: argparse.Namespace, sources: list[Source], say: Callable[[str], None]) -> int:
    from training.corpus.terms import build_terms

    if args.min_packages < 1 or not 0 < args.min_share <= 1:
        raise UsageError("--min-packages must be >= 1 and --min-share in (0, 1]")
    _fetch_splits(args, sources, ("train", "valid", "test"), say)
    say(build_terms(args.corpus, args.cache, args.tmx, args.min_packages, args.min_share))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(argv)
    except UsageError as error:
        print(f"{PROG}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
