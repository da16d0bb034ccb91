"""`python -m training.source_lengths MODEL_DIR [--recipe RECIPE]`: count the source side of a model's
training text by words and write the counts into its model_card.json (`source_lengths`).

They are the length part of the model's domain language model (model/text/domain_scorer.py), by
which a request naming no model chooses among a pair's models of several domains
(service/domain_routing.py). The training text is the recipe's: its `train_split` of `data_dir`
and every `train_mix` entry as many times as its `copies`, read as the training loop reads them
(training/data.py `read_training_text`). Without --recipe, the recipe the model directory's manifest
records (the last stage's: a model whose last stage was trained on other text than the first, such
as an alignment head trained on part of the data, needs the first stage's named).

Errors end with exit code 2 and one line on stderr.
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Sequence

from training.usage import OneLineParser, UsageError

PROG = "python -m training.source_lengths"


def count_lengths(texts: Sequence[str], bins: int) -> list[int]:
    """texts counted by words (whitespace-separated): index n for n words, the last bin for bins - 1 or more."""
    counts = Counter(min(len(text.split()), bins - 1) for text in texts)
    return [counts.get(n, 0) for n in range(bins)]


def run(argv: Sequence[str] | None) -> int:
    parser = OneLineParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path, help="the model directory whose card gets the counts")
    parser.add_argument("--recipe", type=Path, default=None,
                        help="the recipe whose training text is counted (default: the one the manifest records)")
    args = parser.parse_args(argv)
    from model.model_card import record_source_lengths
    from model.text.domain_scorer import LENGTH_BINS
    from training.data import read_training_text
    from training.recipe import TrainingRecipe, load_recipe

    if not (args.model_dir / "manifest.json").is_file():
        raise UsageError(f"model_dir: no manifest.json in {args.model_dir}")
    try:
        if args.recipe is not None:
            if not args.recipe.is_file():
                raise UsageError(f"--recipe: no such file: {args.recipe}")
            recipe = load_recipe(args.recipe)
        else:
            # Only the recipe is read: the weights need not be checked to count the text they learned.
            manifest = json.loads((args.model_dir / "manifest.json").read_text(encoding="utf-8"))
            recorded = manifest.get("training", {}).get("recipe") if isinstance(manifest, dict) else None
            if not recorded:
                raise UsageError(f"{args.model_dir}/manifest.json records no recipe: name one with --recipe")
            recipe = TrainingRecipe.from_dict(recorded, str(args.model_dir / "manifest.json"))
        texts, _ = read_training_text(recipe)
    except (FileNotFoundError, ValueError) as error:  # RecipeError is a ValueError
        raise UsageError(str(error)) from None
    counts = count_lengths(texts, LENGTH_BINS)
    try:
        card = record_source_lengths(args.model_dir, counts)
    except ValueError as error:
        raise UsageError(str(error)) from None
    one_word = counts[1] / max(len(texts), 1)
    print(f"{card}: {len(texts)} source texts counted ({100 * one_word:.1f} % of one word)", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(argv)
    except UsageError as error:
        print(f"{PROG}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
