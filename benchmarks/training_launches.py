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


def count_step(recipe_file: str, implementation: str, tokens: int, seed: int,
               model_overrides: dict | None = None) -> dict[str, int]:
    import torch

    from model.config import ModelConfig
    from model.transformer import Transformer
    from training.losses import label_smoothed_loss

    model_keys = {**json.loads((REPO / "recipes" / recipe_file).read_text())["model"], **(model_overrides or {})}
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


# Part 1 of the En-De study on an H100 (2026-11-27, 8 trainings under CUDA MPS, log.jsonl of each run):
# the baseline (516 launches a step with fused AdamW) took 46.3 ms an update, QueryK heterogeneous
# 1-2-3 (864) 64.3 ms. A line through the two: ms = FIXED_MS + MS_PER_LAUNCH x launches. Part 2 (H200,
# 2026-11-30, 4 trainings) measured QueryK heterogeneous 1-2-3 at 65.5 ms: the time follows a
# training's own launches, not how many trainings share the GPU (up to 8 at least).
# What one part leaves for training: a part's time limit (studies/en-de-part3.json), less its scoring
# reserve and about 10 s for the processes to start; validation (about 1.5 s a time, every 1,000
# updates) and checkpoints (0.1 s, every 100) come out of it too.
PART = json.loads((REPO / "studies" / "en-de-part3.json").read_text())
START_S = 10
SLOT_TRAINING_S = PART["time_limit_s"] - PART["score_reserve_s"] - START_S
OVERHEAD_S = 8 * 1.5 + 80 * 0.1
CALIBRATION = ((516, 46.3), (864, 64.3))
MS_PER_LAUNCH = (CALIBRATION[1][1] - CALIBRATION[0][1]) / (CALIBRATION[1][0] - CALIBRATION[0][0])
FIXED_MS = CALIBRATION[0][1] - MS_PER_LAUNCH * CALIBRATION[0][0]


def count_bias_kernel() -> None:
    """Count the recurrent-bias kernels (model/biases/recurrence_kernel.py, what CUDA runs) instead of
    the PyTorch step loop: each Triton launch counts once. The kernels do not run (Triton's CPU
    interpreter takes minutes for one batch): a count depends on the shapes, not on the values."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    from model.biases import recurrence_kernel

    def counted(kernel, grid, *args, **meta):
        mode = _get_current_dispatch_mode()
        if mode is not None:
            mode.count += 1
            mode.calls += 1

    recurrence_kernel.wanted = lambda logits: True
    recurrence_kernel._kernels = lambda: ("forward", "backward")  # no Triton needed to count
    recurrence_kernel.launch = counted


def study_costs(study: Path, tokens: int, seed: int) -> list[dict]:
    """Every run of a study: fused-AdamW launches a step, the update time that part 1's line gives
    for it (symmetric runs: both directions' models), and whether its recipe fits one part's training time."""
    from training.study_spec import load_study

    rows = []
    for run in load_study(study).runs:
        overrides = {key.split(".", 1)[1]: value for key, value in run.overrides.items() if key.startswith("model.")}
        recipe = json.loads(run.recipe.read_text())
        counts = count_step(str(run.recipe.resolve().relative_to(REPO / "recipes")), "fused", tokens, seed, overrides)
        launches = counts["total"] * (2 if run.command == "train-symmetric" else 1)
        ms = FIXED_MS + MS_PER_LAUNCH * launches
        seconds = ms * recipe["max_updates"] / 1000 + OVERHEAD_S * recipe["max_updates"] / 8000
        rows.append({"run": run.name, "launches": launches, "ms": round(ms, 1), "updates": recipe["max_updates"],
                     "seconds": round(seconds), "fits": seconds <= SLOT_TRAINING_S})
        print(rows[-1], flush=True)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=2048, help="source tokens in the batch")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", type=Path, default=REPO / "results" / "training_launches_cpu.md")
    p.add_argument("--study", type=Path, help="instead: every run of this study, fused AdamW, with the update time "
                                              "part 1's calibration predicts (a slot's plan)")
    p.add_argument("--bias-kernel", action="store_true",
                   help="count the recurrent alignment biases through their CUDA kernels (one launch a pass "
                        "and direction) instead of the PyTorch step loop the CPU runs")
    args = p.parse_args()
    kernel_flag = " --bias-kernel" if args.bias_kernel else ""
    if args.bias_kernel:
        count_bias_kernel()
    if args.study is not None:
        rows = study_costs(args.study, args.tokens, args.seed)
        lines = ["# Launches per training step of every study run, and the slot time they predict", "",
                 f"Command: `OMP_NUM_THREADS=1 python benchmarks/training_launches.py --study {args.study} "
                 f"--tokens {args.tokens}{kernel_flag} --out {args.out}`", "",
                 "Fused AdamW (what CUDA runs). ms/update: the line through part 1's two measured systems among 8 "
                 f"trainings sharing an H100 under MPS ({CALIBRATION[0][0]} launches: {CALIBRATION[0][1]} ms, "
                 f"{CALIBRATION[1][0]}: {CALIBRATION[1][1]} ms), so {FIXED_MS:.1f} ms + {MS_PER_LAUNCH:.4f} ms a launch, "
                 "for each training whatever shares the GPU with it (part 2, 4 trainings on an H200: QueryK "
                 "heterogeneous 1-2-3 65.5 ms against 64.3 predicted): a prediction, not a measurement, made before "
                 "a training batch was padded in one copy (benchmarks/training_batches.py), which may make it "
                 f"pessimistic. Training s: the updates at that time plus validation and checkpoints ({OVERHEAD_S:.0f} s "
                 f"for 8,000 updates); fits: within the {SLOT_TRAINING_S} s a part trains (a {PART['time_limit_s']} s limit, "
                 f"{PART['score_reserve_s']} s for scoring, {START_S} s for the processes to start). Symmetric runs "
                 "count both directions."
                 + (" Recurrent alignment biases through their CUDA kernels (model/biases/recurrence_kernel.py, "
                    "one launch a pass and direction), not the CPU's step loop." if args.bias_kernel else ""), "",
                 "| run | launches a step | predicted ms/update | updates | predicted training s | fits a part |",
                 "|---|---:|---:|---:|---:|---|"]
        lines += [f"| {r['run']} | {r['launches']} | {r['ms']} | {r['updates']} | {r['seconds']} | "
                  f"{'yes' if r['fits'] else 'no'} |" for r in rows]
        args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(args.out)
        return 0
    rows = []
    for name, recipe in RECIPES.items():
        for implementation in IMPLEMENTATIONS:
            counts = count_step(recipe, implementation, args.tokens, args.seed)
            rows.append((name, implementation, counts))
            print(name, implementation, counts, flush=True)
    lines = ["# Kernel launches per training step (operators dispatched, counted on the CPU)", "",
             f"Command: `OMP_NUM_THREADS=1 python benchmarks/training_launches.py --tokens {args.tokens} --seed {args.seed}{kernel_flag}`",
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
