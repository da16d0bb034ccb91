"""`python -m training.study_bundle STUDY --into DIR --name NAME`: what a study slot brings back.

A lent GPU machine starts bare and returns only a few files (studies/gpu/README.md), so a study part
packs its output directory into two archives:

- DIR/NAME-results.tar.gz: what the table and its checks read, and what is committed
  (results/study-*/): recipe.json, log.jsonl, train.out, eval/*.json, eval/*.hyp, and each model
  directory's manifest.json and config.json. No checkpoints, weights or SentencePiece models.
- DIR/NAME-parents.tar.gz: the whole model directories of the runs that another run of the study
  starts from (`init`), when this slot trained them, so that a later part can fine-tune them
  (the developer unpacks it and carries those paths to the next slot). Absent when there are none.

- DIR/NAME-model-RUN.tar.gz (with --models-of PART and --models N): the model directory of the
  lowest trained seed of each of the part's runs, one archive each (about 6 MB: a returned file may
  have 16 MiB), at most N, in the part's order; the systems a later session benchmarks or ships.

Members are paths relative to the working directory, as the study names them (OUT/RUN/seedK/...):
`tar xzf NAME-results.tar.gz` in the repository root puts them back. Each archive is written to
a temporary name and renamed, so a slot cut short leaves the previous whole archive.
"""
from __future__ import annotations

import argparse
import sys
import tarfile
from pathlib import Path
from typing import Sequence

from training.study_spec import StudyError, StudySpec, is_trained, load_study, run_dir, tiny
from training.usage import OneLineParser, UsageError

PROG = "phrasal-study-bundle"
# Files of a run directory the report reads (and the checks of a study need), by name or suffix.
RESULT_FILES = {"recipe.json", "log.jsonl", "train.out", "manifest.json", "config.json"}
RESULT_SUFFIXES = {".hyp"}


def result_files(spec: StudySpec) -> list[Path]:
    """The light files of every job's run directory, and the reports of the study and its parts."""
    found = sorted(path for path in spec.out.glob("*") if path.suffix in (".json", ".md") and path.is_file())
    for run, seed in spec.jobs():
        directory = run_dir(spec, run, seed)
        if not directory.is_dir():
            continue
        for path in sorted(directory.rglob("*")):
            if "checkpoints" in path.relative_to(directory).parts or not path.is_file():
                continue
            in_eval = path.parent.name == "eval"
            if path.name in RESULT_FILES or path.suffix in RESULT_SUFFIXES or (in_eval and path.suffix == ".json"):
                found.append(path)
    return found


def parent_models(spec: StudySpec) -> list[Path]:
    """The model directories that runs of the study start from (`init`), where they are trained."""
    parents = []
    for run in spec.runs:
        if run.init is None:
            continue
        source = spec.run(run.init)
        for seed in run.seeds:
            directory = run_dir(spec, source, seed) / source.model
            if is_trained(spec, source, seed) and directory not in parents:
                parents.append(directory)
    return parents


def write_archive(path: Path, members: list[Path]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with tarfile.open(partial, "w:gz") as archive:
        for member in members:
            archive.add(str(member), recursive=member.is_dir())
    partial.replace(path)


def bundle(spec: StudySpec, into: Path, name: str) -> list[Path]:
    written = []
    results = into / f"{name}-results.tar.gz"
    write_archive(results, result_files(spec))
    written.append(results)
    parents = parent_models(spec)
    if parents:
        archive = into / f"{name}-parents.tar.gz"
        write_archive(archive, parents)
        written.append(archive)
    return written


def part_models(spec: StudySpec, part: StudySpec, most: int) -> list[tuple[str, Path]]:
    """(run name, model directory) of the lowest trained seed of each of the part's runs, at most
    `most`, skipping the parents (they travel in the parents archive)."""
    parents = set(parent_models(spec))
    found = []
    for run in part.runs:
        trained = [seed for seed in sorted(run.seeds) if is_trained(spec, spec.run(run.name), seed)]
        if not trained:
            continue
        directory = run_dir(spec, spec.run(run.name), trained[0]) / spec.run(run.name).model
        if directory not in parents and (directory / "model.safetensors").is_file():
            found.append((run.name, directory))
    return found[:most]


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=PROG, description="Pack a study's results (and its fine-tuning parents) into archives.")
    p.add_argument("study", type=Path, help="the full study (studies/en-de.json): its runs say what to pack")
    p.add_argument("--into", type=Path, required=True, help="directory the archives are written to")
    p.add_argument("--name", required=True, help="archive name prefix, e.g. part1")
    p.add_argument("--tiny", action="store_true", help="the study's dry run (`training.study --tiny`, OUT-tiny)")
    p.add_argument("--models-of", type=Path, metavar="PART", help="a part of the study: also pack its runs' models")
    p.add_argument("--models", type=int, default=0, metavar="N", help="with --models-of: at most N model archives")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if not args.name or "/" in args.name:
            raise UsageError("--name must be a plain file name prefix")
        spec = load_study(args.study)
        spec = tiny(spec) if args.tiny else spec
        for path in bundle(spec, args.into, args.name):
            print(path)
        if args.models_of is not None and args.models > 0:
            part = load_study(args.models_of)
            for name, directory in part_models(spec, tiny(part) if args.tiny else part, args.models):
                archive = args.into / f"{args.name}-model-{name}.tar.gz"
                # A slot packs every minute; a finished model does not change, so it is packed once.
                if not archive.is_file() or archive.stat().st_mtime < (directory / "manifest.json").stat().st_mtime:
                    write_archive(archive, [directory])
                print(archive)
    except (UsageError, StudyError, OSError) as error:
        print(f"{PROG}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
