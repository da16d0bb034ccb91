"""Training cost of the two forms of the Markov and fertility biases (model/biases/window_bias.py).

    OMP_NUM_THREADS=1 python benchmarks/bias_forms.py --device cpu --tokens 2048 --rounds 7

Three models of recipes/alignment-biases-tiny-en-de.json's size: no biases (the tiny Transformer),
all three biases in the "parallel" form (the history is a shift and a cumsum of the unbiased
attention) and in the "recurrent" form (Cohn et al. §3.2–§3.3: the biased softmax runs step by
step over the target, reading the biased rows). The bias weights are made random (they start at
zero), which changes no cost. A step is zero_grad, forward, label-smoothed cross-entropy,
backward and an Adam step on one fixed random batch of about --tokens source tokens
(benchmarks/attention_variants.py `random_batch`: lengths 12..28, targets 10% longer). The forms
run in turns, one step each per round, so that a load change on a shared machine hits all three
alike; the table gives the median over the rounds. One more, untimed step per form counts the aten
operators dispatched (views excluded; benchmarks/attention_variants.py `OpCounter`): a
device-independent proxy for the kernel launches that bound a model this small on a GPU, where
the recurrent form's loop costs launches rather than arithmetic. Writes results/bias_forms_<device>.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from attention_variants import VOCAB, OpCounter, machine, random_batch  # noqa: E402  (benchmarks/ is on sys.path)

RECIPE = REPO / "recipes" / "alignment-biases-tiny-en-de.json"
FORMS = ("none", "parallel", "recurrent")


def model_keys(form: str) -> dict:
    keys = json.loads(RECIPE.read_text())["model"]
    if form == "none":
        return {k: v for k, v in keys.items() if k != "alignment_biases"}
    biases = keys["alignment_biases"]
    return {**keys, "alignment_biases": {name: ({**options, "form": form} if name in ("markov", "fertility") else options)
                                         for name, options in biases.items()}}


def build(form: str, device, seed: int):
    import torch

    from model.config import ModelConfig
    from model.transformer import Transformer

    config = ModelConfig.from_dict({**model_keys(form), "vocab_size": VOCAB, "pad_id": 0, "bos_id": 1, "eos_id": 2})
    torch.manual_seed(seed)
    model = Transformer(config).to(device).train()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if ".biases." in name:
                parameter.normal_(std=0.5)
    return model, torch.optim.Adam(model.parameters(), lr=1e-4)


def measure(device_name: str, tokens: int, rounds: int, warmup: int, amp: bool, seed: int) -> dict:
    import torch
    import torch.nn.functional as F

    device = torch.device(device_name)
    src, tgt_in, tgt_out = random_batch(tokens, seed, device)
    models = {form: build(form, device, seed) for form in FORMS}

    def step(form: str) -> float:
        model, optimizer = models[form]
        start = time.perf_counter()
        model.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=amp and device.type == "cuda"):
            logits = model(src, tgt_in).logits  # (B, T, V)
        loss = F.cross_entropy(logits.float().flatten(0, 1), tgt_out.flatten(), ignore_index=0, label_smoothing=0.1)
        loss.backward()
        optimizer.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    for _ in range(warmup):
        for form in FORMS:
            step(form)
    times: dict[str, list[float]] = {form: [] for form in FORMS}
    for _ in range(rounds):
        for form in FORMS:
            times[form].append(step(form))
    ops = {}
    for form in FORMS:
        counter = OpCounter()
        with counter:
            step(form)
        ops[form] = counter.count
    return {
        "ops": ops,
        "ms": {form: 1000 * statistics.median(values) for form, values in times.items()},
        "spread_ms": {form: (1000 * min(values), 1000 * max(values)) for form, values in times.items()},
        "sentences": int(src.shape[0]),
        "src_tokens": int(src.ne(0).sum()),
        "tgt_tokens": int(tgt_out.ne(0).sum()),
        "target_steps": int(tgt_in.shape[1]),
    }


def render(result: dict, args: argparse.Namespace) -> str:
    ms = result["ms"]
    lines = [
        f"# Training cost of the bias forms ({args.device})",
        "",
        f"Machine: {machine(args.device)}; torch threads: {args.threads}.",
        f"Command: `OMP_NUM_THREADS={args.threads} python benchmarks/bias_forms.py --device {args.device} "
        f"--tokens {args.tokens} --rounds {args.rounds} --warmup {args.warmup}`",
        "",
        f"One training step (forward, label-smoothed cross-entropy, backward, Adam) of the "
        f"recipes/alignment-biases-tiny-en-de.json model (4+4 layers, d 128) on one fixed random batch: "
        f"{result['sentences']} sentences, {result['src_tokens']} source and {result['tgt_tokens']} target tokens, "
        f"{result['target_steps']} target steps (the recurrent form loops over them in each of the 4 decoder layers). "
        f"Median over {args.rounds} rounds, the three models stepping in turns.",
        "",
        "| biases | form | ms / step (median) | min–max ms | × no biases | aten ops / step |",
        "|---|---|---:|---:|---:|---:|",
    ]
    labels = {"none": ("none", "–"), "parallel": ("position, markov, fertility", "parallel"),
              "recurrent": ("position, markov, fertility", "recurrent (Cohn et al. §3.2–§3.3)")}
    for form in FORMS:
        low, high = result["spread_ms"][form]
        lines.append(f"| {labels[form][0]} | {labels[form][1]} | {ms[form]:.1f} | {low:.1f}–{high:.1f} | "
                     f"{ms[form] / ms['none']:.2f} | {result['ops'][form]} |")
    lines += [
        "",
        f"Recurrent / parallel: {ms['recurrent'] / ms['parallel']:.2f}×.",
        "",
        "The times are noisy: the machine is shared with other jobs (rounds interleave the forms so that "
        "load changes hit all three alike, and the min–max column shows the spread). The operator counts "
        "are exact and do not depend on the machine: on a GPU, where a step this small is bound by kernel "
        "launches, they rather than the CPU times say what the recurrent form's loop costs.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--tokens", type=int, default=2048, help="source tokens in the batch (the recipe trains on 8192)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-amp", action="store_true", help="on cuda: float32 instead of bf16 autocast")
    p.add_argument("--out", type=Path, help="results file (default results/bias_forms_<device>.md)")
    args = p.parse_args()
    import torch

    args.threads = torch.get_num_threads()
    result = measure(args.device, args.tokens, args.rounds, args.warmup, not args.no_amp, args.seed)
    out = args.out or REPO / "results" / f"bias_forms_{args.device}.md"
    out.write_text(render(result, args), encoding="utf-8")
    print(out.read_text())


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
