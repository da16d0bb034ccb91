"""`python -m training.study_alignment`: how well one study system aligns, for the study table.

    python -m training.study_alignment --model-dir runs/study-en-de/baseline/seed1/model --out alignment.json
    python -m training.study_alignment --make-reference --source en --target de   # once, on a CPU: eflomal's links

Two figures per model:
- gold AER on the hand-aligned Europarl pairs of data/gold_align_deen_dev (out of domain), with the
  system's own best alignment: every decoder layer's cross-attention, each read at the step that
  predicts a target word and, shifted, at the step that reads it (shift-att), and the supervised
  head where the model has one, each read as argmax links and as the symmetrised row+column
  links (`readings`); the candidate with the lowest AER is the system's (the `method` field
  names it). Phrasal systems are read through the token attention their layers
  return (n-gram attention spread over its tokens). Choosing on the same 50 pairs flatters every
  system a little, and all alike.
- in-domain agreement: the AER of that same method's links on the first sentences of a Multi30k
  test split, scored against eflomal's grow-diag-final-and links as if they were gold (no gold
  exists in domain). The reference is computed once (--make-reference, eflomal is not needed on a
  GPU machine) and kept in data/multi30k/eflomal/.

Links come from training.forced_alignment; counts are summed over the corpus (training.alignment_metrics).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from training import alignment_metrics as am
from training.usage import OneLineParser, UsageError

PROG = "phrasal-study-alignment"
GOLD_DIR = Path("data/gold_align_deen_dev")
REFERENCE_DIR = Path("data/multi30k/eflomal")
REFERENCE_SPLIT = "test_2016_flickr"
REFERENCE_LIMIT = 500
REFERENCE_EXTRA = 29000


def reference_path(directory: Path, split: str, source: str, target: str) -> Path:
    return directory / f"{split}.{source}-{target}.gdfa"


def gold_file(gold_dir: Path, source: str, target: str) -> tuple[Path, bool]:
    """The gold links of the pair and whether they are written target-first (X-Y.wa: X first)."""
    for first, second, reverse in ((source, target, False), (target, source, True)):
        path = gold_dir / f"{first}-{second}.wa"
        if path.is_file():
            return path, reverse
    raise UsageError(f"{gold_dir} has no {source}-{target}.wa or {target}-{source}.wa")


READINGS = ("argmax", "row+column")


def candidates(loaded: Any) -> list[dict[str, Any]]:
    """Every alignment a model offers: each layer unshifted and shifted, and its supervised head."""
    found = [{"layer": layer, "shift": shift, "supervised": False}
             for layer in range(loaded.config.decoder_layers) for shift in (False, True)]
    if loaded.model.supervised_alignment is not None:
        found.append({"layer": None, "shift": True, "supervised": True})
    return found


def method_name(method: dict[str, Any]) -> str:
    name = "supervised head" if method["supervised"] else f"layer {method['layer']}" + (" shift" if method["shift"] else "")
    return f"{name}, {method['reading']}"


def readings(loaded: Any, method: dict[str, Any], source_words, target_words, batch_size: int) -> dict[str, list]:
    """The method's links read two ways: each target word's heaviest source word ("argmax"), and the
    word matrix read both ways and symmetrised with the cognate prior ("row+column", what the
    service's supervised method returns; model.alignments.symmetrisation.matrix_links)."""
    from training.forced_alignment import align_direction

    found = align_direction(loaded, source_words, target_words, layer=method["layer"], shift=method["shift"],
                            supervised=method["supervised"], batch_size=batch_size)
    return {"argmax": found.hard, "row+column": found.symmetric}


def split_words(lines: Sequence[str]) -> list[list[str]]:
    from training.alignment_labels import words

    return [words(line) for line in lines]


def evaluate_model(model_dir: Path, *, gold_dir: Path, reference_dir: Path, data_dir: Path, split: str,
                   limit: int, device: str, batch_size: int) -> dict[str, Any]:
    from model.model_dir import load_model_dir
    from training.data import read_lines, split_path
    from training.loop import resolve_device

    started = time.perf_counter()
    loaded = load_model_dir(model_dir, resolve_device(device))
    source, target = loaded.source_lang, loaded.target_lang
    path, reverse = gold_file(gold_dir, source, target)
    src_lines = read_lines(gold_dir / f"test.{source}", limit)
    tgt_lines = read_lines(gold_dir / f"test.{target}", limit)
    gold, _, base = am.read_gold(read_lines(path, limit), len(src_lines), "pharaoh", 0, reverse, str(path))
    source_words = [line.split() for line in src_lines]
    target_words = [line.split() for line in tgt_lines]
    am.check_bounds(gold, [len(w) for w in source_words], [len(w) for w in target_words], base, str(path))
    scored = []
    for method in candidates(loaded):
        for reading, links in readings(loaded, method, source_words, target_words, batch_size).items():
            row = {**method, "reading": reading}
            scored.append({"method": method_name(row), **row, "aer": _rounded(am.score(links, gold).aer)})
    best = min(scored, key=lambda row: 1.0 if row["aer"] is None else row["aer"])  # no links at all: AER 1
    report: dict[str, Any] = {"model_dir": str(model_dir), "source_lang": source, "target_lang": target,
                              "gold": str(path), "gold_sentences": len(gold), "method": best["method"],
                              "gold_aer": best["aer"], "candidates": scored}
    reference = reference_path(reference_dir, split, source, target)
    if reference.is_file():
        links = [am.parse_links(line, f"{reference} line {k}") for k, line in enumerate(read_lines(reference), 1)]
        n = min(limit, len(links))
        in_src = split_words(read_lines(split_path(data_dir, split, source), n))
        in_tgt = split_words(read_lines(split_path(data_dir, split, target), n))
        own = readings(loaded, best, in_src, in_tgt, batch_size)[best["reading"]]
        counts = am.score(own, [am.GoldAlignment.of(l) for l in links[:n]])
        report.update(agreement_aer=_rounded(counts.aer), agreement_reference=str(reference), agreement_sentences=n)
    else:
        report.update(agreement_aer=None, agreement_reference=f"{reference} (missing: --make-reference)")
    report["seconds"] = round(time.perf_counter() - started, 2)
    return report


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def make_reference(*, data_dir: Path, split: str, source: str, target: str, limit: int, extra: int,
                   out_dir: Path) -> Path:
    """eflomal's grow-diag-final-and links for the first `limit` pairs of `split` (words split off
    punctuation), learning also from `extra` training lines."""
    from training.align_eval import symmetrised
    from training.data import read_lines, split_path
    from training.eflomal_links import eflomal_alignments

    src = split_words(read_lines(split_path(data_dir, split, source), limit))
    tgt = split_words(read_lines(split_path(data_dir, split, target), limit))
    extra_src = [" ".join(w) for w in split_words(read_lines(split_path(data_dir, "train", source), extra))] if extra else []
    extra_tgt = [" ".join(w) for w in split_words(read_lines(split_path(data_dir, "train", target), extra))] if extra else []
    rows = symmetrised("", *eflomal_alignments(src, tgt, extra_src, extra_tgt))
    path = reference_path(out_dir, split, source, target)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(am.pharaoh(links) + "\n" for links in rows["grow-diag-final-and"]), encoding="utf-8")
    return path


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=PROG, description="Gold AER and in-domain agreement with eflomal of one model.")
    p.add_argument("--model-dir", type=Path, help="the model to score")
    p.add_argument("--out", type=Path, help="write the report here (JSON); default stdout")
    p.add_argument("--make-reference", action="store_true", help="compute eflomal's reference links instead")
    p.add_argument("--source", default="en", help="with --make-reference: source language")
    p.add_argument("--target", default="de", help="with --make-reference: target language")
    p.add_argument("--gold-dir", type=Path, default=GOLD_DIR)
    p.add_argument("--reference-dir", type=Path, default=REFERENCE_DIR)
    p.add_argument("--data-dir", type=Path, default=Path("data/multi30k"))
    p.add_argument("--split", default=REFERENCE_SPLIT, help="the in-domain split")
    p.add_argument("--limit", type=int, default=REFERENCE_LIMIT,
                   help="first N sentences of --split, and of the gold set (which has 50)")
    p.add_argument("--extra", type=int, default=REFERENCE_EXTRA, help="with --make-reference: training lines eflomal also reads")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--device", default="auto")
    return p


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.limit < 1 or args.batch_size < 1 or args.extra < 0:
        raise UsageError("--limit and --batch-size must be >= 1, --extra >= 0")
    if args.make_reference:
        path = make_reference(data_dir=args.data_dir, split=args.split, source=args.source, target=args.target,
                              limit=args.limit, extra=args.extra, out_dir=args.reference_dir)
        print(path)
        return 0
    if args.model_dir is None:
        raise UsageError("--model-dir is required (or --make-reference)")
    report = evaluate_model(args.model_dir, gold_dir=args.gold_dir, reference_dir=args.reference_dir,
                            data_dir=args.data_dir, split=args.split, limit=args.limit, device=args.device,
                            batch_size=args.batch_size)
    text = json.dumps(report, indent=2) + "\n"
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(args.out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from model.errors import ArtifactError, ConfigError

    try:
        return run(argv)
    except (UsageError, ArtifactError, ConfigError, am.AlignmentInputError, OSError) as error:
        print(f"{PROG}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
