"""Kernel launches a training step costs, counted on the CPU: what bounds small models on a GPU.

    OMP_NUM_THREADS=1 python benchmarks/training_launches.py --tokens 2048

The second training step (the first creates AdamW's state) of each study recipe's model (forward, label-smoothed loss, backward, gradient
clipping, AdamW) on one fixed random batch, counting the aten operators dispatched (views
excluded: benchmarks/attention_variants.py `OpCounter`) in each phase and in total, with AdamW's
three implementations (training/recipe.py `optimizer_implementation`: on CUDA "auto" is "fused").
A dispatched operator is one kernel launch on a GPU (the fused optimizer step is one launch per
parameter group's kernel, the foreach step one per operation over every parameter at once, the
plain step one per operation per parameter); the counts do not depend on the machine. No timings:
on a GPU, benchmarks/study_throughput.py measures what the counts cost. Writes
results/training_launches_cpu.md.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from attention_variants import VOCAB, OpCounter, random_batch  # noqa: E402  (benchmarks/ is on sys.path)

RECIPES = {
    "baseline": "transformer-tiny-en-de.json",
    "queryk-heterogeneous-1-2-3": "queryk-heterogeneous-1-2-3-tiny-en-de.json",
    "convkv-heterogeneous-1-2-3": "convkv-heterogeneous-1-2-3-tiny-en-de.json",
    "fine2d-cross": "fine2d-cross-tiny-en-de.json",
    "phrase-representation": "phrase-representation-tiny-en-de.json",
    "biases-all (recurrent)": "alignment-biases-tiny-en-de.json",
}
IMPLEMENTATIONS = {"plain": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}


def count_step(recipe_file: str, implementation: str, tokens: int, seed: int) -> dict[str, int]:
    import torch

    from model.config import ModelConfig
    from model.transformer import Transformer
    from training.losses import label_smoothed_loss

    model_keys = json.loads((REPO / "recipes" / recipe_file).read_text())["model"]
    config = ModelConfig.from_dict({**model_keys, "dropout": 0.0, "vocab_size": VOCAB, "pad_id": 0, "bos_id": 1,
                                    "eos_id": 2})
    torch.manual_seed(seed)
    model = Transformer(config).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, **IMPLEMENTATIONS[implementation])
    src, tgt_in, tgt_out = random_batch(tokens, seed, torch.device("cpu"))
    n_tokens = int(tgt_out.ne(0).sum())

    def step(counters: dict | None = None) -> None:
        for phase in ("forward", "backward", "clip", "optimizer"):
            counter = OpCounter() if counters is not None else None
            with counter if counter is not None else contextlib.nullcontext():
                if phase == "forward":
                    optimizer.zero_grad(set_to_none=True)
                    loss = label_smoothed_loss(model(src, tgt_in).logits, tgt_out, smoothing=0.1, pad_id=0,
                                               n_tokens=n_tokens).loss
                elif phase == "backward":
                    loss.backward()
                elif phase == "clip":
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                else:
                    optimizer.step()
            if counters is not None:
                counters[phase] = counter.count

    step()  # the first step also creates AdamW's state: count a steady one
    counts: dict[str, int] = {}
    step(counts)
    counts["total"] = sum(counts.values())
    counts["parameters"] = len(list(model.parameters()))
    return counts


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=2048, help="source tokens in the batch")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=REPO / "results" / "training_launches_cpu.md")
    args = p.parse_args()
    rows = []
    for name, recipe in RECIPES.items():
        for implementation in IMPLEMENTATIONS:
            counts = count_step(recipe, implementation, args.tokens, args.seed)
            rows.append((name, implementation, counts))
            print(name, implementation, counts, flush=True)
    lines = ["# Kernel launches per training step (operators dispatched, counted on the CPU)", "",
             f"Command: `OMP_NUM_THREADS=1 python benchmarks/training_launches.py --tokens {args.tokens} --seed {args.seed}`",
             "", "One step of each recipe's model on one random batch (benchmarks/attention_variants.py "
             "`random_batch`), the second step (the first creates AdamW's state); aten operators that compute, views excluded. The counts are exact and the same on "
             "any machine; on a GPU each is a kernel launch.", "",
             "| model | AdamW | parameters | forward | backward | clip | optimizer | total |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name, implementation, c in rows:
        lines.append(f"| {name} | {implementation} | {c['parameters']} | {c['forward']} | {c['backward']} | "
                     f"{c['clip']} | {c['optimizer']} | {c['total']} |")
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
