"""`phrasal-train` / `python -m training`: train a recipe, or average a run's checkpoints into a model dir.

    python -m training train --recipe recipes/transformer-tiny-en-de.json --out runs/tiny-en-de
    python -m training train --out runs/tiny-en-de --resume            # recipe from the run dir
    python -m training train --recipe recipes/align-added-head-tiny-en-de.json --init models/en-de --out runs/align
    python -m training train --recipe recipes/smoke.json --out runs/smoke --set max_updates=10 --set model.dropout=0
    python -m training average --run runs/tiny-en-de --last 10 --out models/en-de --fp16
    python -m training train-symmetric --recipe recipes/symmetric-tiny-en-de.json --out runs/sym-en-de \
        [--init-forward models/en-de --init-backward models/de-en]     # both directions, one loop

`train-symmetric` writes runs/NAME/models/en-de and runs/NAME/models/de-en; `average` on a symmetric
run writes OUT/en-de and OUT/de-en.

Errors a user can cause (missing or invalid recipe, unknown key, bad --set, missing data) end with
exit code 2 and one line on stderr.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from model.errors import ArtifactError, ConfigError
from training.recipe import RecipeError, TrainingRecipe, load_recipe
from training.usage import OneLineParser, UsageError

PROG = "phrasal-train"
# Keys that change how a run is observed or saved, not what it trains: a resumed run may change them.
RESUMABLE_CHANGES = {"max_updates", "log_interval", "val_interval", "val_every_epoch", "val_bleu_sentences",
                     "val_beam", "decode_max_len_a", "decode_max_len_b", "decode_length_penalty",
                     "decode_length_penalty_form", "checkpoint_interval", "keep_last",
                     "average_last", "export_fp16", "name", "optimizer_implementation", "compile",
                     "compile_mode"}


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROG, description="Train phrasal translation models.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    t = sub.add_parser("train", help="train a recipe into a run directory")
    _add_training_arguments(t)
    t.add_argument("--init", type=Path, metavar="PATH",
                   help="start from a trained model (model dir, training checkpoint or run dir); the recipe may "
                        "add a supervised alignment or global fertility head, or alignment biases, or leave out such a "
                        "head (training/initialization.py)")
    t.add_argument("--spm", type=Path, metavar="PATH",
                   help="use this SentencePiece model instead of training one, e.g. the other direction's, so "
                        "that both can start a train-symmetric run (which needs one joint vocabulary)")

    s = sub.add_parser("train-symmetric", help="train both directions of a symmetric recipe in one loop")
    _add_training_arguments(s)
    s.add_argument("--init-forward", type=Path, metavar="PATH",
                   help="start the source->target model from a model dir, training checkpoint or run dir")
    s.add_argument("--init-backward", type=Path, metavar="PATH",
                   help="start the target->source model from a model dir, training checkpoint or run dir")

    a = sub.add_parser("average", help="average the last K checkpoints of a run and write a model dir")
    a.add_argument("--run", type=Path, required=True, help="run directory holding checkpoints/")
    a.add_argument("--last", type=int, required=True, help="how many of the newest checkpoints to average")
    a.add_argument("--out", type=Path, required=True, help="model directory to write")
    a.add_argument("--fp16", action="store_true", help="store fp16 weights")
    return parser


def _add_training_arguments(t: argparse.ArgumentParser) -> None:
    t.add_argument("--recipe", type=Path, help="recipe JSON (recipes/*.json); optional with --resume")
    t.add_argument("--out", type=Path, required=True, help="run directory, e.g. runs/NAME")
    t.add_argument("--device", default="auto", help="auto (CUDA if available), cpu or cuda")
    t.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --out")
    t.add_argument("--max-updates", type=int, help="override the recipe's max_updates")
    t.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a recipe key (JSON value; model.KEY for the model config); repeatable")
    t.add_argument("--no-export", action="store_true", help="skip averaging the last checkpoints into the model directory at the end")
    t.add_argument("--quiet", action="store_true", help="no progress bar or status lines")


def resolve_recipe(args: argparse.Namespace) -> TrainingRecipe:
    saved = args.out / "recipe.json"
    if args.recipe is not None:
        recipe = load_recipe(args.recipe, args.overrides)
    elif args.resume and saved.is_file():
        recipe = load_recipe(saved, args.overrides)
    else:
        raise UsageError("--recipe is required (or --resume with a run directory that holds recipe.json)")
    if args.max_updates is not None:
        recipe = _replace(recipe, "--max-updates", max_updates=args.max_updates)
    if args.resume and args.recipe is not None and saved.is_file():
        before = json.loads(saved.read_text(encoding="utf-8"))
        changed = sorted(k for k, v in recipe.to_dict().items() if before.get(k) != v and k not in RESUMABLE_CHANGES)
        if changed:
            raise RecipeError([f"differs from the run's recipe.json in {', '.join(changed)}; "
                               f"a resumed run must keep what it trains"], str(args.recipe))
    return recipe


def _replace(recipe: TrainingRecipe, source: str, **changes: object) -> TrainingRecipe:
    try:
        return recipe.replace(**changes)
    except RecipeError as error:
        raise RecipeError(error.problems, source) from None


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "train":
        from training.loop import train

        recipe = resolve_recipe(args)
        result = train(recipe, args.out, device=args.device, resume=args.resume, progress=not args.quiet,
                       export=not args.no_export, init=args.init, spm=args.spm)
        if result.model_dir is not None and not args.quiet:
            print(result.model_dir)
        return 0
    if args.command == "train-symmetric":
        from training.symmetric import train_symmetric

        recipe = resolve_recipe(args)
        result = train_symmetric(recipe, args.out, device=args.device, resume=args.resume, progress=not args.quiet,
                                 export=not args.no_export, init_forward=args.init_forward,
                                 init_backward=args.init_backward)
        if not args.quiet:
            for path in result.model_dirs.values():
                print(path)
        return 0
    if args.command == "average":
        from training.finalize import average_and_save, average_and_save_symmetric, run_kind

        if run_kind(args.run) == "symmetric":
            outs, infos = average_and_save_symmetric(args.run, args.last, args.out, fp16=args.fp16)
            for name, out in outs.items():
                print(f"{out} ({name}, average of {', '.join(infos[name]['averaged'])})")
            return 0
        out, info = average_and_save(args.run, args.last, args.out, fp16=args.fp16)
        print(f"{out} (average of {', '.join(info['averaged'])})")
        return 0
    raise UsageError(f"unknown command {args.command!r}")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(argv)
    except (UsageError, RecipeError, ConfigError, ArtifactError, FileNotFoundError) as error:
        message = " ".join(str(error).split())  # one line, whatever the message holds
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
