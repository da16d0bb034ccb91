"""Do the training speed levers keep the numbers? Loss curves with and without a lever, beside the
seed-to-seed spread that says what "within noise" means.

    python benchmarks/training_levers.py --lever optimizer_implementation=fused --updates 300
    python benchmarks/training_levers.py --lever compile=true --updates 300 --device cpu

Trains recipes/smoke.json (a toy model on 300 Multi30k pairs; dropout 0) three times on the same
batches: as is (the reference), with the lever, and as is with another seed. Prints the logged
training loss of each at every log interval, the largest |lever - reference| and the largest
|other seed - reference|. The lever keeps the numerics when its difference stays well inside the
seed spread (tests/training/test_training_levers.py asserts a tenth of it for the optimizer
implementations over 40 updates). Writes nothing; the numbers depend on the machine only
through float rounding, so any machine can rerun it.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def loss_curve(overrides: dict, device: str, updates: int) -> list[float]:
    from training.loop import train
    from training.recipe import load_recipe

    settings = {"max_updates": updates, "val_interval": updates, "val_bleu_sentences": 0, "checkpoint_interval": updates,
                "log_interval": 10, "data_dir": str(REPO / "data" / "multi30k"), **overrides}
    recipe = load_recipe(REPO / "recipes" / "smoke.json", [f"{k}={json.dumps(v)}" for k, v in settings.items()])
    with tempfile.TemporaryDirectory(prefix="phrasal-levers-") as tmp:
        result = train(recipe, Path(tmp) / "run", device=device, progress=False, export=False)
    return [event["loss"] for event in result.events if event["event"] == "train"]


def compare(lever: dict, device: str, updates: int, base: dict | None = None) -> dict:
    base = base or {}
    reference = loss_curve(base, device, updates)
    changed = loss_curve({**base, **lever}, device, updates)
    other_seed = loss_curve({**base, "seed": 2}, device, updates)
    return {"reference": reference, "lever": changed, "other_seed": other_seed,
            "max_lever_difference": max(abs(a - b) for a, b in zip(reference, changed)),
            "max_seed_difference": max(abs(a - b) for a, b in zip(reference, other_seed))}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lever", action="append", required=True, metavar="KEY=VALUE", help="recipe key (JSON value)")
    p.add_argument("--base", action="append", default=[], metavar="KEY=VALUE", help="recipe key for all three runs")
    p.add_argument("--updates", type=int, default=300)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()

    def parse(items):
        out = {}
        for item in items:
            key, _, raw = item.partition("=")
            try:
                out[key] = json.loads(raw)
            except json.JSONDecodeError:
                out[key] = raw
        return out

    result = compare(parse(args.lever), args.device, args.updates, parse(args.base))
    print(f"{'update':>6} {'reference':>10} {'lever':>10} {'seed 2':>10}")
    for k, row in enumerate(zip(result["reference"], result["lever"], result["other_seed"]), start=1):
        print(f"{10 * k:>6} " + " ".join(f"{v:10.5f}" for v in row))
    print(f"largest |lever - reference| {result['max_lever_difference']:.2e}; "
          f"largest |seed 2 - reference| {result['max_seed_difference']:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
