"""`python -m training.align_eval`: precision, recall and AER of a model's attention alignments.

    python -m training.align_eval --model-dir models/en-de --src test.en --tgt test.de --gold test.talp
    python -m training.align_eval --model-dir models/en-de --reverse-model-dir models/de-en \\
        --src test.en --tgt test.de --gold test.naacl --gold-format naacl --layer 2 --shift --json
    python -m training.align_eval --model-dir models/en-de --src s.en --tgt s.de \\
        --reference eflomal --eflomal-extra 29000 --write-alignments out/   # no gold: write links only

Words are the whitespace tokens of --src / --tgt; gold links index them. The reference
translation is forced through the model (training.forced_alignment) and each target word is
linked to the source word its attention weighs most. Reported rows: forward; with --row-column
forward row+column (the same matrix read both ways and symmetrised, model.alignments.symmetrisation.matrix_links:
what the service's "supervised" method returns); with
--reverse-model-dir (a target->source model, its links transposed) also reverse,
intersection, union and grow-diag-final; with --soft-threshold a thresholded variant of each
direction; with --reference eflomal the same five rows from eflomal (unsupervised, run on the
same sentences plus --eflomal-extra lines of training text); with --reference diagonal a
position-only baseline. Counts are summed over the corpus before dividing (training.alignment_metrics).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from model.alignments.cognates import COGNATE_WEIGHT
from training import alignment_metrics as am
from training.eflomal_links import Alignments, eflomal_alignments
from training.usage import OneLineParser, UsageError

PROG = "phrasal-align-eval"


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=PROG, description="Score a phrasal model's attention alignments against gold alignments.")
    p.add_argument("--model-dir", type=Path, required=True, help="the source->target model")
    p.add_argument("--reverse-model-dir", type=Path,
                   help="a target->source model: adds the reverse and symmetrised rows")
    p.add_argument("--src", type=Path, required=True,
                   help="source sentences, one a line, words = whitespace tokens (plain or .gz)")
    p.add_argument("--tgt", type=Path, required=True, help="target sentences (the references forced through the model)")
    p.add_argument("--gold", type=Path, help="gold word alignments; without it links are only counted / written")
    p.add_argument("--gold-format", choices=("auto", *am.FORMATS), default="auto",
                   help="pharaoh: a line a sentence, i-j sure, i-jp / ipj / i?j possible; "
                        "naacl: 'sent i j [S|P] [conf]' lines; auto: tell from the first line")
    p.add_argument("--gold-base", type=int, choices=(0, 1),
                   help="index base of the gold file (default 0 for pharaoh, 1 for naacl, where 0 is NULL)")
    p.add_argument("--gold-reverse", action="store_true", help="the gold file writes target-source links")
    p.add_argument("--layer", type=int,
                   help="decoder layer whose cross-attention aligns (default: the config's alignment_layer)")
    p.add_argument("--reverse-layer", type=int, help="the same for --reverse-model-dir")
    p.add_argument("--shift", action="store_true",
                   help="align target word k with the step that reads it, not the step that predicts it (shift-att)")
    p.add_argument("--supervised", action="store_true",
                   help="align with the model's supervised alignment head (at the steps that read each word) "
                        "instead of a layer's attention")
    p.add_argument("--row-column", action="store_true",
                   help="also score the forward matrix read both ways and symmetrised (what the service's "
                        "supervised method returns); with --reverse-model-dir also the reverse one, the two "
                        "link sets by grow-diag-final-and, and both directions' weights combined per link "
                        "(the service's bidirectional method)")
    p.add_argument("--cognate-weight", type=float, default=COGNATE_WEIGHT, metavar="W",
                   help="the orthographic prior added before a matrix is read both ways (row+column rows and "
                        f"bidirectional; model/alignments/cognates.py): W x the similarity of words spelt alike; "
                        f"default {COGNATE_WEIGHT:g}, what the service adds; 0 leaves it out")
    p.add_argument("--link-threshold", type=float,
                   help="with --row-column: keep a symmetrised link only if p(i|j)·p(j|i) >= this "
                        "(model.alignments.symmetrisation.matrix_links); default: the supervised head's link_threshold "
                        "with --supervised, else 0")
    p.add_argument("--soft-threshold", type=float,
                   help="also score every link with >= this share of a target word's attention")
    p.add_argument("--reference", action="append", choices=("eflomal", "diagonal"), default=[],
                   help="also align with eflomal (pip install eflomal) or a diagonal baseline; repeatable")
    p.add_argument("--eflomal-extra", type=int, default=0, metavar="N",
                   help="let eflomal also learn from the first N lines of --data-dir/train.LANG.gz "
                        "(languages from the manifest)")
    p.add_argument("--words", choices=("whitespace", "split"), default="whitespace",
                   help="what a word is: whitespace tokens (gold files index them), or those tokens with "
                        "punctuation split off (training.alignment_labels.WORD_PATTERN), for raw text")
    p.add_argument("--agreement", action="store_true",
                   help="no gold: score every row against eflomal's grow-diag-final-and links as if they were "
                        "gold (an in-domain check where no gold exists; needs --reference eflomal)")
    p.add_argument("--data-dir", type=Path, default=Path("data/multi30k"))
    p.add_argument("--limit", type=int, help="first N sentences only")
    p.add_argument("--batch-size", type=int, default=32, help="sentences a forced-decoding batch")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--write-alignments", type=Path, metavar="DIR",
                   help="write each row's links as DIR/<row>.txt (Pharaoh, 0-based)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    return p


def symmetrised(prefix: str, forward: Alignments, reverse: Alignments) -> dict[str, Alignments]:
    """The five rows of one aligner: both directions (source, target oriented) and their combinations."""
    return {
        f"{prefix}forward": forward,
        f"{prefix}reverse": reverse,
        f"{prefix}intersection": [am.intersection(f, r) for f, r in zip(forward, reverse)],
        f"{prefix}union": [am.union(f, r) for f, r in zip(forward, reverse)],
        f"{prefix}grow-diag-final": [am.grow_diag_final(f, r) for f, r in zip(forward, reverse)],
        f"{prefix}grow-diag-final-and": [am.grow_diag_final_and(f, r) for f, r in zip(forward, reverse)],
    }


def row_file(name: str) -> str:
    """A row's file name for --write-alignments: "eflomal grow-diag-final" -> eflomal.grow-diag-final.txt."""
    return name.replace(" ", ".").replace(">=", "") + ".txt"


def _fmt(value: float | None) -> str:
    return "     -" if value is None else f"{value:6.4f}"


def score_lines(results: dict[str, dict[str, Any]]) -> list[str]:
    """The table of scored rows: links, precision, recall and AER per row name."""
    lines = [f"{'method':34s} {'links':>7s} {'precision':>9s} {'recall':>7s} {'AER':>7s}"]
    for name, row in results.items():
        scores = "  ".join(_fmt(row[key]) for key in ("precision", "recall", "aer"))
        lines.append(f"{name:34s} {row['links']:7d}    {scores}")
    return lines


def render(report: dict[str, Any]) -> str:
    shift = " (shift)" if report["shift"] else ""
    if report.get("supervised"):
        shift = ", supervised head"
    lines = [f"{report['source_lang']}->{report['target_lang']} {report['model_dir']}: {report['sentences']} "
             f"sentences, layer {report['layer']}{shift}, {report['seconds']}s on {report['device']}"]
    gold = report.get("gold")
    if gold:
        lines.append(f"gold {gold['path']} ({gold['format']}, {gold['base']}-based): "
                     f"{gold['sure']} sure, {gold['possible']} possible links")
        lines += score_lines(report["results"])
    else:
        lines.append(f"{'method':34s} {'links':>7s}")
        for name, row in report["results"].items():
            lines.append(f"{name:34s} {row['links']:7d}")
    if report.get("written"):
        lines.append(f"links written to {report['written']}")
    return "\n".join(lines)


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.gold is None and args.write_alignments is None and not args.agreement:
        raise UsageError("nothing to do: give --gold to score, --agreement, or --write-alignments DIR to write the links")
    if args.agreement and (args.gold is not None or "eflomal" not in args.reference):
        raise UsageError("--agreement scores against eflomal: it needs --reference eflomal and no --gold")
    if args.batch_size < 1 or (args.limit is not None and args.limit < 1) or args.eflomal_extra < 0:
        raise UsageError("--batch-size and --limit must be >= 1, --eflomal-extra >= 0")
    if args.cognate_weight < 0.0:
        raise UsageError(f"--cognate-weight must be >= 0, got {args.cognate_weight:g}")
    if args.link_threshold is not None and not 0.0 <= args.link_threshold < 1.0:
        raise UsageError(f"--link-threshold must be in [0, 1), got {args.link_threshold}")
    if args.soft_threshold is not None and not 0.0 < args.soft_threshold <= 1.0:
        raise UsageError(f"--soft-threshold must be in (0, 1], got {args.soft_threshold}")
    if args.reverse_layer is not None and args.reverse_model_dir is None:
        raise UsageError("--reverse-layer needs --reverse-model-dir")
    if args.eflomal_extra and "eflomal" not in args.reference:
        raise UsageError("--eflomal-extra needs --reference eflomal")

    from model.alignments.bidirectional import agreement_links
    from model.model_dir import load_model_dir
    from training.data import read_lines, split_path
    from training.forced_alignment import align_direction
    from training.loop import resolve_device

    src_lines, tgt_lines = read_lines(args.src), read_lines(args.tgt)
    if len(src_lines) != len(tgt_lines):
        raise UsageError(f"--src has {len(src_lines)} lines but --tgt has {len(tgt_lines)}")
    gold: list[am.GoldAlignment] | None = None
    if args.gold is not None:
        gold, gold_format, gold_base = am.read_gold(
            read_lines(args.gold), len(src_lines), args.gold_format, args.gold_base, args.gold_reverse,
            str(args.gold))
        if args.words == "split":
            from training.alignment_labels import words as split_words

            count = lambda line: len(split_words(line))  # noqa: E731
        else:
            count = lambda line: len(line.split())  # noqa: E731
        am.check_bounds(gold, [count(s) for s in src_lines], [count(t) for t in tgt_lines], gold_base, str(args.gold))
    n = len(src_lines) if args.limit is None else min(args.limit, len(src_lines))
    if args.words == "split":
        from training.alignment_labels import words as split_words

        source_words = [split_words(line) for line in src_lines[:n]]
        target_words = [split_words(line) for line in tgt_lines[:n]]
    else:
        source_words = [line.split() for line in src_lines[:n]]
        target_words = [line.split() for line in tgt_lines[:n]]
    gold = gold[:n] if gold is not None else None

    device = resolve_device(args.device)
    started = time.perf_counter()
    forward_model = load_model_dir(args.model_dir, device)
    common = dict(shift=args.shift, threshold=args.soft_threshold, batch_size=args.batch_size,
                  supervised=args.supervised, link_threshold=args.link_threshold, cognate_weight=args.cognate_weight)
    forward = align_direction(forward_model, source_words, target_words, layer=args.layer, name="--model-dir",
                              **common)
    rows: dict[str, Alignments] = {}
    layer = forward_model.config.alignment_layer if args.layer is None else args.layer
    if args.reverse_model_dir is None:
        rows["forward"] = forward.hard
    else:
        reverse_model = load_model_dir(args.reverse_model_dir, device)
        expected = (forward_model.target_lang, forward_model.source_lang)
        if (reverse_model.source_lang, reverse_model.target_lang) != expected:
            raise UsageError(f"--reverse-model-dir translates {reverse_model.source_lang}->"
                             f"{reverse_model.target_lang}, expected {expected[0]}->{expected[1]}")
        reverse = align_direction(reverse_model, target_words, source_words, layer=args.reverse_layer,
                                  name="--reverse-model-dir", **common)
        rows.update(symmetrised("", forward.hard, [am.transpose(links) for links in reverse.hard]))
    if args.row_column:
        rows["forward row+column"] = forward.symmetric
        if args.reverse_model_dir is not None:
            rows["reverse row+column"] = [am.transpose(links) for links in reverse.symmetric]
            rows["gdfa of row+column sets"] = [
                am.grow_diag_final_and(f, r) for f, r in zip(forward.symmetric, rows["reverse row+column"])]
            # What the service's "bidirectional" method returns: both directions' word weights
            # combined per link, read both ways (model/alignments/bidirectional.py).
            rows["bidirectional"] = [
                agreement_links(f, r, s, t, cognate_weight=args.cognate_weight)[0]
                for f, r, s, t in zip(forward.rows, reverse.rows, source_words, target_words)]
    if forward.soft is not None:
        rows[f"forward soft>={args.soft_threshold:g}"] = forward.soft
    if args.reverse_model_dir is not None and reverse.soft is not None:
        rows[f"reverse soft>={args.soft_threshold:g}"] = [am.transpose(links) for links in reverse.soft]
    model_seconds = time.perf_counter() - started

    for reference in dict.fromkeys(args.reference):
        if reference == "diagonal":
            rows["diagonal"] = [am.diagonal(len(s), len(t)) for s, t in zip(source_words, target_words)]
            continue
        extra_src: list[str] = []
        extra_tgt: list[str] = []
        if args.eflomal_extra:
            for lang, extra in ((forward_model.source_lang, extra_src), (forward_model.target_lang, extra_tgt)):
                lines = read_lines(split_path(args.data_dir, "train", lang), args.eflomal_extra)
                extra += [" ".join(split_words(line)) for line in lines] if args.words == "split" else lines
        rows.update(symmetrised("eflomal ", *eflomal_alignments(source_words, target_words, extra_src, extra_tgt)))

    report: dict[str, Any] = {
        "model_dir": str(args.model_dir),
        "reverse_model_dir": str(args.reverse_model_dir) if args.reverse_model_dir else None,
        "source_lang": forward_model.source_lang, "target_lang": forward_model.target_lang, "sentences": n,
        "layer": layer, "reverse_layer": args.reverse_layer, "shift": args.shift, "supervised": args.supervised,
        "soft_threshold": args.soft_threshold,
        "eflomal_extra": args.eflomal_extra if "eflomal" in args.reference else None,
        "device": str(device), "seconds": round(model_seconds, 2),
    }
    if args.agreement:
        reference = rows.pop("eflomal grow-diag-final-and")
        gold, gold_format, gold_base = [am.GoldAlignment.of(links) for links in reference], "eflomal", 0
        report["gold"] = {"path": "eflomal grow-diag-final-and (agreement, not gold)", "format": gold_format,
                          "base": 0, "reverse": False, "sure": sum(len(g.sure) for g in gold), "possible":
                          sum(len(g.possible) for g in gold)}
        report["results"] = {name: am.score(links, gold).to_dict() for name, links in rows.items()}
    elif gold is not None:
        report["gold"] = {"path": str(args.gold), "format": gold_format, "base": gold_base,
                          "reverse": args.gold_reverse, "sure": sum(len(g.sure) for g in gold),
                          "possible": sum(len(g.possible) for g in gold)}
        report["results"] = {name: am.score(links, gold).to_dict() for name, links in rows.items()}
    else:
        report["results"] = {name: {"links": sum(len(a) for a in links)} for name, links in rows.items()}
    report["written"] = None
    if args.write_alignments is not None:
        args.write_alignments.mkdir(parents=True, exist_ok=True)
        for name, links in rows.items():
            path = args.write_alignments / row_file(name)
            path.write_text("".join(am.pharaoh(a) + "\n" for a in links), encoding="utf-8")
        report["written"] = str(args.write_alignments)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from model.errors import ArtifactError, ConfigError
    from training.recipe import RecipeError

    try:
        return run(argv)
    except (UsageError, ArtifactError, ConfigError, RecipeError, am.AlignmentInputError, OSError,
            UnicodeDecodeError) as error:
        print(f"{PROG}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
