"""Where a training step's time goes on the host: the question behind a study part's slot.

    python benchmarks/training_step_profile.py --recipe recipes/queryk-heterogeneous-1-2-3-tiny-en-de.json --device cuda
    python benchmarks/training_step_profile.py --recipe ... --device cuda --compile      # through torch.compile
    python benchmarks/training_step_profile.py --recipe ... --device cuda --compile --compile-mode reduce-overhead
    python benchmarks/training_step_profile.py --device cpu --tokens 512 --steps 3        # a dry run

Study part 2 (H200, 2026-11-30) measured QueryK heterogeneous 1-2-3 at 65.5 ms an update whether 4 or 8
trainings shared the GPU: each training's own host work bounds it. This trains the recipe's model
in this process the way `training/loop.py` does (bf16 autocast on CUDA, label-smoothed loss,
clipping, AdamW with the recipe's implementation) on one random batch of `--tokens` source tokens
(benchmarks/attention_variants.py `random_batch`; the recipes bound batches at 8,192 tokens), and
reports, over `--steps` steps after `--warmup`:
- ms a step by the wall clock, the device synchronised once at the end (so the host's launching and
  the device's work overlap as in training), the batch copied to the device every step (through
  page-locked memory as training does; `--pageable` from pageable memory, as it did until 2026-11-30);
- ms a step of host time the profiler sees in the step's phases (forward, backward, clip, optimizer),
  of device kernel time, and the kernels launched a step (with bf16 autocast, the recipes' default on
  CUDA, every weight is cast each way each step: `--amp off` shows what that costs);
- the operators with the most host time a step.
No data loading (benchmarks/training_batches.py measures building a batch). Writes a section to
`--out` (default results/training_step_profile_DEVICE.md).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from attention_variants import VOCAB, random_batch  # noqa: E402  (benchmarks/ is on sys.path)
from host import append_report, run_heading  # noqa: E402
from profiled import kernel_events, open_device  # noqa: E402
from training.recipe import COMPILE_MODES  # noqa: E402

PHASES = ("forward", "backward", "clip", "optimizer")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="training_step_profile", description=__doc__.split("\n\n")[0])
    p.add_argument("--recipe", type=Path, default=Path("recipes/queryk-heterogeneous-1-2-3-tiny-en-de.json"))
    p.add_argument("--device", default="cuda")
    p.add_argument("--tokens", type=int, default=8192)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--compile", action="store_true", help="the model's forward through torch.compile, as "
                                                          "the recipe key `compile` does")
    p.add_argument("--compile-mode", choices=COMPILE_MODES, default="default",
                   help="torch.compile's mode, as the recipe key `compile_mode` gives it (reduce-overhead: CUDA graphs)")
    p.add_argument("--pageable", action="store_true", help="copy each step's batch to the GPU from pageable "
                                                           "memory, as training did until 2026-11-30")
    p.add_argument("--amp", choices=("bf16", "off"), default="bf16",
                   help="bf16 autocast on CUDA (the recipes' default: a cast kernel for every weight each way), or off")
    p.add_argument("--top", type=int, default=12)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    if not args.recipe.is_file():
        p.error(f"--recipe: no file {args.recipe}")
    if args.compile_mode != "default" and not args.compile:
        p.error(f"--compile-mode {args.compile_mode} goes with --compile")

    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile, record_function

    from decode_speed import sync  # noqa: E402  (benchmarks/ is on sys.path)
    from model.config import ModelConfig
    from model.transformer import Transformer
    from training.data import Batch
    from training.loop import compile_forward, optimizer_kernels
    from training.recipe import load_recipe
    from training.validation import direction_loss

    device = open_device(p, args.device)
    recipe = load_recipe(args.recipe, [])
    config = ModelConfig.from_dict({**json.loads(args.recipe.read_text())["model"], "vocab_size": VOCAB,
                                    "pad_id": 0, "bos_id": 1, "eos_id": 2})
    torch.manual_seed(1)
    model = Transformer(config).to(device).train()
    params = [q for q in model.parameters() if q.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=recipe.lr, betas=recipe.betas, eps=recipe.adam_eps,
                                  weight_decay=recipe.weight_decay, **optimizer_kernels(recipe, device))
    forward, graph_steps = compile_forward(model, args.compile_mode, device) if args.compile else (model, False)
    src, tgt_in, tgt_out = random_batch(args.tokens, 1, torch.device("cpu"))
    batch = Batch(src, tgt_in, tgt_out, list(range(src.shape[0])))  # on the host, copied every step as in training
    n_tokens = batch.n_tgt_tokens
    amp = device.type == "cuda" and args.amp == "bf16"

    def step(marked: bool) -> None:
        def phase(name):
            return record_function(f"phase:{name}") if marked else contextlib.nullcontext()
        with phase("forward"):
            optimizer.zero_grad(set_to_none=True)
            if graph_steps:
                torch.compiler.cudagraph_mark_step_begin()
            loss = direction_loss(model, batch.to(device, pinned=not args.pageable), n_tokens,
                                  smoothing=recipe.label_smoothing, amp=amp, forward=forward).objective
        with phase("backward"):
            loss.backward()
        with phase("clip"):
            torch.nn.utils.clip_grad_norm_(params, recipe.clip_norm if recipe.clip_norm > 0 else math.inf)  # as training/loop.py
        with phase("optimizer"):
            optimizer.step()

    started = time.perf_counter()
    for _ in range(args.warmup):
        step(False)
    sync(device)
    warm_s = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(args.steps):
        step(False)
    sync(device)
    wall_ms = (time.perf_counter() - started) / args.steps * 1000

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(args.steps):
            step(True)
        sync(device)
    events = prof.key_averages()
    # On CUDA each phase also appears as a GPU annotation of the same name: its host events are the CPU ones.
    phases = {e.key.split(":", 1)[1]: e.cpu_time_total / args.steps / 1000 for e in events
              if e.key.startswith("phase:") and getattr(e, "device_type", DeviceType.CPU) == DeviceType.CPU}
    kernels = kernel_events(events, annotations=("phase:",))
    device_ms = sum(e.device_time_total for e in kernels) / args.steps / 1000
    launches = sum(e.count for e in kernels) / args.steps
    ops = sorted((e for e in events if not e.key.startswith("phase:")), key=lambda e: e.self_cpu_time_total,
                 reverse=True)[: args.top]
    compiled = f" (compiled, {args.compile_mode})" if args.compile_mode != "default" else " (compiled)"
    name = (args.recipe.name + (compiled if args.compile else "") + (", batch from pageable memory" if args.pageable else "")
            + (", no autocast" if args.amp == "off" else ""))
    card = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    lines = [f"    python benchmarks/training_step_profile.py --recipe {args.recipe} "
             f"--device {args.device} --tokens {args.tokens} --steps {args.steps}" + (" --compile" if args.compile else "")
             + (f" --compile-mode {args.compile_mode}" if args.compile_mode != "default" else "")
             + (" --pageable" if args.pageable else "") + (" --amp off" if args.amp == "off" else ""), "",
             f"{name} on {card}, torch {torch.__version__}, {src.shape[0]} sentences ({int(batch.src.ne(0).sum())} "
             f"source and {n_tokens} target tokens); warm-up {args.warmup} steps in {warm_s:.1f} s.", "",
             "| wall ms a step | host ms: forward | backward | clip | optimizer | all phases | device kernel ms a step "
             "| kernels a step |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|",
             f"| {wall_ms:.1f} | " + " | ".join(f"{phases.get(k, 0.0):.1f}" for k in PHASES)
             + f" | {sum(phases.get(k, 0.0) for k in PHASES):.1f} | {device_ms:.1f} | {launches:.0f} |", "",
             "Operators with the most host time (self, ms a step; calls a step):", "",
             "| operator | host ms | calls |", "|---|---:|---:|"]
    lines += [f"| `{e.key}` | {e.self_cpu_time_total / args.steps / 1000:.2f} | {e.count // args.steps} |" for e in ops]
    report = run_heading(f", {card}") + "\n".join(lines) + "\n"
    out = args.out or REPO / "results" / f"training_step_profile_{device.type}.md"
    append_report(out, "Where a training step's time goes", "python benchmarks/training_step_profile.py", report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
