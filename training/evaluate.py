"""`phrasal-eval` / `python -m training.evaluate`: translate a test set with a model dir and score it.

    python -m training.evaluate --model-dir models/en-de --split test_2016_flickr --beam 5
    python -m training.evaluate --model-dir models/en-de --src in.en --ref in.de --out hyps.de --json
    python -m training.evaluate --model-dir models/en-de --src in.en            # hypotheses to stdout
    python -m training.evaluate --model-dir models/en-de --split test_2016_flickr --record test_2016_flickr

The length penalty (α and its form, model/decoding/length_penalty.py) is the one the model's recipe names
(`decode_length_penalty`, `decode_length_penalty_form` in the manifest's training recipe), else
the shared default |y|^1; --length-penalty / --length-penalty-form override it.

Scores, each printed with its sacreBLEU signature: BLEU cased on detokenised text (13a), BLEU
lowercased (sacreBLEU lowercase=True, the convention of the published Multi30k anchors), chrF;
and placeholders kept: of the source sentences holding printf, {name} or ${VAR} placeholders, the
percentage whose translation holds the same multiset (training/corpus/clean.py `placeholders`;
the raw model's output, without the service's protection), null when no source has one.

--record NAME merges the scores into the model directory's model_card.json under scores.NAME:
what the service lists for the model (GET /models, service/catalog.py).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from model.decoding import defaults as decoding_defaults
from model.decoding.length_penalty import FORMS
from training.usage import OneLineParser, UsageError

PROG = "phrasal-eval"


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=PROG, description="Translate and score with a phrasal model directory.")
    p.add_argument("--model-dir", type=Path, required=True)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--split", help="a split of --data-dir, e.g. test_2016_flickr (languages from the manifest)")
    source.add_argument("--src", type=Path, help="source sentences, one a line (plain or .gz)")
    p.add_argument("--ref", type=Path, help="reference translations for --src, one a line")
    p.add_argument("--data-dir", type=Path, default=Path("data/multi30k"))
    p.add_argument("--beam", type=int, default=decoding_defaults.BEAM_SIZE)
    p.add_argument("--length-penalty", type=float, default=None,
                   help=f"α (default: the model's recipe, else {decoding_defaults.LENGTH_PENALTY})")
    p.add_argument("--length-penalty-form", choices=FORMS, default=None,
                   help=f"power: |y|^α; gnmt: ((5+|y|)/6)^α (default: the model's recipe, else "
                        f"{decoding_defaults.LENGTH_PENALTY_FORM})")
    p.add_argument("--batch-size", type=int, default=64, help="sentences a batch")
    p.add_argument("--limit", type=int, help="first N sentences only")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--out", type=Path, help="write the hypotheses here, one a line")
    p.add_argument("--json", action="store_true", help="print the scores as one JSON object")
    p.add_argument("--record", metavar="NAME",
                   help="merge the scores into MODEL_DIR/model_card.json as test set NAME (what the service lists)")
    return p


def score(hyps: Sequence[str], refs: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Corpus scores with their sacreBLEU signatures."""
    from sacrebleu.metrics import BLEU, CHRF

    out: dict[str, dict[str, Any]] = {}
    for key, metric in (("bleu", BLEU()), ("bleu_lowercase", BLEU(lowercase=True)), ("chrf", CHRF())):
        result = metric.corpus_score(list(hyps), [list(refs)])
        out[key] = {"score": round(result.score, 2), "signature": str(metric.get_signature()), "detail": str(result)}
    return out


def length_penalty_of(manifest: dict[str, Any], alpha: float | None, form: str | None) -> tuple[float, str]:
    """(α, form): what the command line gives, else what the model's training recipe names, else the defaults."""
    training = manifest.get("training")
    recipe = training.get("recipe") if isinstance(training, dict) else None
    recipe = recipe if isinstance(recipe, dict) else {}
    if alpha is None:
        alpha = recipe.get("decode_length_penalty", decoding_defaults.LENGTH_PENALTY)
    if form is None:
        form = recipe.get("decode_length_penalty_form", decoding_defaults.LENGTH_PENALTY_FORM)
    return alpha, form


def placeholder_survival(sources: Sequence[str], hyps: Sequence[str]) -> dict[str, Any]:
    """Of the sources with placeholders, the percentage whose hypothesis has the same ones."""
    from training.corpus.clean import placeholders

    wanted = [(placeholders(s), h) for s, h in zip(sources, hyps)]
    wanted = [(found, h) for found, h in wanted if found]
    kept = sum(placeholders(h) == found for found, h in wanted)
    return {"score": round(100 * kept / len(wanted), 2) if wanted else None, "sentences": len(wanted),
            "signature": "placeholders|printf-brace-shell|multiset"}


LABELS = {"bleu": "BLEU cased detok 13a", "bleu_lowercase": "BLEU lowercased 13a", "chrf": "chrF2"}


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.beam < 1 or args.batch_size < 1:
        raise UsageError("--beam and --batch-size must be >= 1")
    if args.length_penalty is not None and not args.length_penalty >= 0:
        raise UsageError(f"--length-penalty must be >= 0, got {args.length_penalty}")
    if args.ref is not None and args.src is None:
        raise UsageError("--ref needs --src")
    if args.record is not None and args.split is None and args.ref is None:
        raise UsageError("--record needs references: --split, or --src with --ref")
    if args.record is not None and args.limit is not None:
        raise UsageError("--record keeps a whole test set's scores: leave --limit out")
    if args.record is not None:
        from model.model_card import read_card

        try:  # a card that cannot take the scores stops here, before the test set is decoded
            read_card(args.model_dir)
        except ValueError as error:
            raise UsageError(f"--record: {error}") from None

    import torch

    from model.model_dir import load_model_dir
    from training.data import read_lines, split_path
    from training.loop import resolve_device
    from training.translate import translate_batch

    device = resolve_device(args.device)
    loaded = load_model_dir(args.model_dir, device)
    if args.split is not None:
        src = read_lines(split_path(args.data_dir, args.split, loaded.source_lang), args.limit)
        refs: list[str] | None = read_lines(split_path(args.data_dir, args.split, loaded.target_lang), args.limit)
    else:
        src = read_lines(args.src, args.limit)
        refs = read_lines(args.ref, args.limit) if args.ref is not None else None
    if refs is not None and len(refs) != len(src):
        raise UsageError(f"{len(src)} source but {len(refs)} reference lines")

    alpha, form = length_penalty_of(loaded.manifest, args.length_penalty, args.length_penalty_form)
    started = time.perf_counter()
    hyps = translate_batch(loaded.model, loaded.tokenizer, src, args.beam, batch_size=args.batch_size,
                           length_penalty=alpha, length_penalty_form=form)
    seconds = time.perf_counter() - started
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    elif refs is None and not args.json:
        sys.stdout.write("".join(h + "\n" for h in hyps))

    report: dict[str, Any] = {
        "model_dir": str(args.model_dir), "source_lang": loaded.source_lang, "target_lang": loaded.target_lang,
        "split": args.split, "src": str(args.src) if args.src else None, "sentences": len(src), "beam": args.beam,
        "length_penalty": alpha, "length_penalty_form": form, "device": str(device), "seconds": round(seconds, 2),
        "torch": torch.__version__,
    }
    if refs is not None:
        report.update(score(hyps, refs))
    report["placeholders"] = placeholder_survival(src, hyps)
    if args.record is not None:
        from model.model_card import record_scores

        record_scores(args.model_dir, args.record, {key: report[key]["score"] for key in (*LABELS, "placeholders")})
    if args.json:
        print(json.dumps(report, indent=2))
    elif refs is not None:
        print(f"{loaded.source_lang}->{loaded.target_lang} {args.split or args.src}: {len(src)} sentences, "
              f"beam {args.beam}, length penalty {form} α={alpha}, {seconds:.1f}s on {device}")
        for key, label in LABELS.items():
            print(f"{label:22s} = {report[key]['score']:6.2f}  {report[key]['signature']}")
        kept = report["placeholders"]
        if kept["score"] is not None:
            print(f"{'placeholders kept':22s} = {kept['score']:6.2f}  ({kept['sentences']} sentences with placeholders)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from model.errors import ArtifactError, ConfigError
    from training.recipe import RecipeError

    try:
        return run(argv)
    except (UsageError, ArtifactError, ConfigError, RecipeError, FileNotFoundError) as error:
        print(f"{PROG}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
