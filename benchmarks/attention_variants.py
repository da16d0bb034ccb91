"""Cost of every attention variant relative to vanilla: forward+backward time and peak memory per step.

    python benchmarks/attention_variants.py --device cpu --warmup 1 --steps 3
    python benchmarks/attention_variants.py --device cuda            # bf16 autocast, as the recipes train

Each variant is the model of its recipe (recipes/<variant>-tiny-en-de.json; vanilla is
recipes/transformer-tiny-en-de.json; the phrasal kinds sit at all three sites, fine2d at the
cross-attention only), trained on one fixed random batch of about --tokens source
tokens (sentence lengths drawn from 12..28 pieces, padded, like Multi30k). A step is zero_grad,
forward, label-smoothed cross-entropy, backward (and an Adam step with --optimizer). Each variant
runs in its own process so that its peak memory is its own: torch.cuda.max_memory_allocated on
GPU, growth of the peak resident set (ru_maxrss) over the steps on CPU, where torch's allocations
are invisible to tracemalloc. One more, untimed step counts the aten operators dispatched (views
excluded): a device-independent proxy for kernel launches, which bound the step time of a model
this small on a GPU. Writes a markdown section to results/attention_variants_<device>.md.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
from host import cpu_name  # noqa: E402  (benchmarks/host.py: the script's own folder is on sys.path)
VARIANTS = [
    "transformer",
    "convkv-homogeneous-2x2",
    "queryk-homogeneous-2x2",
    "convkv-heterogeneous-1-2",
    "queryk-heterogeneous-1-2",
    "convkv-heterogeneous-1-2-3",
    "queryk-heterogeneous-1-2-3",
    "convkv-interleaved",
    "queryk-interleaved",
    "fine2d-cross",
    "phrase-representation",
    "phrase-representation-queryk",
    "alignment-biases",
]
VOCAB = 10000


def recipe_path(variant: str) -> Path:
    return REPO / "recipes" / f"{variant}-tiny-en-de.json"


def describe(variant: str) -> str:
    model = json.loads(recipe_path(variant).read_text())["model"]
    extras = []
    if model.get("phrase_representation") is not None:
        extras.append(f"phrase representations {json.dumps(model['phrase_representation'])}")
    if model.get("alignment_biases"):
        extras.append(f"alignment biases {', '.join(model['alignment_biases'])}")
    attention = _describe_attention(model)
    return " + ".join(([attention] if attention != "vanilla" or not extras else []) + extras)


def _describe_attention(model: dict) -> str:
    attention = model.get("cross_attention") or model.get("encoder_self_attention")
    if attention is None:
        return "vanilla"
    options = attention.get("options", {})
    if "structure" not in options:  # fine2d: one kind, its options as given
        text = attention["kind"] + (f" {json.dumps(options)}" if options else "")
    else:
        text = f"{attention['kind']} {options['structure']} {options.get('ngrams', [1, 2])}"
        text += f" heads {options['heads_per_ngram']}" if "heads_per_ngram" in options else ""
    sites = [site for site in ("encoder_self", "decoder_self", "cross") if f"{site}_attention" in model]
    return text if len(sites) == 3 else f"{text} ({', '.join(sites)} only)"


# -- one variant, in a child process ----------------------------------------------------------
def measure(variant: str, device_name: str, tokens: int, warmup: int, steps: int, amp: bool, optimizer: bool, seed: int) -> dict:
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(REPO))
    from model.config import ModelConfig
    from model.transformer import Transformer

    from model.attention.kernels import avoid_per_shape_attention_plans

    device = torch.device(device_name)
    avoid_per_shape_attention_plans(device)  # as training does (training.loop.resolve_device)
    model_keys = json.loads(recipe_path(variant).read_text())["model"]
    config = ModelConfig.from_dict({**model_keys, "vocab_size": VOCAB, "pad_id": 0, "bos_id": 1, "eos_id": 2})
    torch.manual_seed(seed)
    model = Transformer(config).to(device).train()
    src, tgt_in, tgt_out = random_batch(tokens, seed, device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4) if optimizer else None

    def step() -> None:
        model.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=amp and device.type == "cuda"):
            logits = model(src, tgt_in).logits  # (B, T, V)
        loss = F.cross_entropy(logits.float().flatten(0, 1), tgt_out.flatten(), ignore_index=0, label_smoothing=0.1)
        loss.backward()
        if opt is not None:
            opt.step()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    rss_before = current_rss_mib()
    for _ in range(warmup):
        step()
    sync()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times, cpu_times = [], []
    for _ in range(steps):
        start, cpu_start = time.perf_counter(), time.process_time()
        step()
        sync()
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    if device.type == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - rss_before  # KiB on Linux
    counter = OpCounter()
    with counter:
        step()
    return {
        "ops": counter.count,
        "calls": counter.calls,
        "variant": variant,
        "ms": 1000 * statistics.median(times),
        "cpu_ms": 1000 * statistics.median(cpu_times),
        "peak_mib": peak,
        "params": sum(p.numel() for p in model.parameters()),
        "src_tokens": int(src.ne(0).sum()),
        "tgt_tokens": int(tgt_out.ne(0).sum()),
        "sentences": src.shape[0],
    }


def OpCounter():
    """A TorchDispatchMode counting the aten operators that run (views and no-op reshapes excluded)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Counter(TorchDispatchMode):
        count = 0  # operators that compute (a kernel each)
        calls = 0  # every dispatch, views included: each costs host time on a launch-bound GPU

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            returns = func._schema.returns
            is_view = bool(returns) and returns[0].alias_info is not None and not returns[0].alias_info.is_write
            if not is_view and func.__name__ != "_unsafe_view.default":
                self.count += 1
            self.calls += 1
            return func(*args, **(kwargs or {}))

    return Counter()


def random_batch(tokens: int, seed: int, device):
    """About `tokens` source tokens: lengths 12..28 (EOS included), targets 10% longer, right-padded."""
    import torch

    g = torch.Generator().manual_seed(seed)
    n = max(1, tokens // 20)
    src_len = torch.randint(12, 29, (n,), generator=g)
    tgt_len = (src_len.float() * 1.1).long()
    src = torch.zeros(n, int(src_len.max()), dtype=torch.long)
    tgt = torch.zeros(n, int(tgt_len.max()) + 1, dtype=torch.long)
    for i in range(n):
        src[i, : src_len[i]] = torch.randint(3, VOCAB, (int(src_len[i]),), generator=g)
        src[i, src_len[i] - 1] = 2
        tgt[i, 0] = 1
        tgt[i, 1 : tgt_len[i] + 1] = torch.randint(3, VOCAB, (int(tgt_len[i]),), generator=g)
    tgt_out = torch.zeros_like(tgt)
    tgt_out[:, :-1] = tgt[:, 1:]
    for i in range(n):
        tgt_out[i, tgt_len[i]] = 2
    return src.to(device), tgt.to(device), tgt_out.to(device)


def current_rss_mib() -> float:
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


# -- the parent: one child per variant, then the table -------------------------------------
def machine(device: str) -> str:
    cpu = cpu_name()
    text = f"CPU: {cpu} ({os.cpu_count()} logical cores)"
    if device == "cuda":
        import torch

        text += f"; GPU: {torch.cuda.get_device_name(0)}"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], required=True)
    parser.add_argument("--tokens", type=int, default=4096, help="source tokens per batch (about)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20, help="timed steps; the median is reported")
    parser.add_argument("--amp", choices=["bf16", "off"], default=None, help="default: bf16 on cuda, off on cpu")
    parser.add_argument("--optimizer", action="store_true", help="include an Adam step in each step")
    parser.add_argument("--variants", nargs="*", default=VARIANTS, help=f"subset of {', '.join(VARIANTS)}")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="default: results/attention_variants_<device>.md")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    amp = (args.amp or ("bf16" if args.device == "cuda" else "off")) == "bf16"
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown:
        print(f"unknown variant(s) {unknown}; known: {', '.join(VARIANTS)}", file=sys.stderr)
        return 2
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print("--device cuda, but torch sees no CUDA device", file=sys.stderr)
            return 2
    if args.child:
        (variant,) = args.variants
        result = measure(variant, args.device, args.tokens, args.warmup, args.steps, amp, args.optimizer, args.seed)
        print(json.dumps(result))
        return 0

    variants = ["transformer", *[v for v in args.variants if v != "transformer"]]
    results = []
    for variant in variants:
        command = [sys.executable, __file__, "--child", "--device", args.device, "--tokens", str(args.tokens),
                   "--warmup", str(args.warmup), "--steps", str(args.steps), "--amp", "bf16" if amp else "off",
                   "--seed", str(args.seed), "--variants", variant] + (["--optimizer"] if args.optimizer else [])
        done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return 1
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        r = results[-1]
        print(f"{variant:28s} {r['ms']:9.1f} ms/step  {r['cpu_ms']:9.1f} CPU ms/step  peak {r['peak_mib']:8.1f} MiB  "
              f"{r['ops']} ops", flush=True)

    base = results[0]
    step = "forward+backward+Adam" if args.optimizer else "forward+backward"
    memory = "torch.cuda.max_memory_allocated" if args.device == "cuda" else "peak RSS growth over the steps (ru_maxrss)"
    lines = [
        f"## Attention variants on {args.device} ({time.strftime('%Y-%m-%d')})",
        "",
        f"- Machine: {machine(args.device)}; torch {__import__('torch').__version__}; {__import__('torch').get_num_threads()} threads",
        f"- Command: `python {shlex.join(['benchmarks/attention_variants.py', *(argv if argv is not None else sys.argv[1:])])}`",
        f"- Model: the recipe's (d=128, 4 heads, FFN 256, 4+4 layers, vocab {VOCAB}), the variant at the sites its recipe "
        f"names (all three for the phrasal kinds, cross-attention for fine2d); "
        f"batch of {base['sentences']} sentences, {base['src_tokens']} source / {base['tgt_tokens']} target tokens; "
        f"amp {'bf16' if amp else 'off'}",
        f"- Time: median of {args.steps} {step} steps after {args.warmup} warm-up step(s) (wall clock, and the "
        f"process's CPU time, which a machine shared with other jobs disturbs less); memory: {memory}; "
        f"aten ops / calls: operators dispatched in one more step, views excluded / included (proxies for "
        f"kernel launches and for host time per step when the GPU waits on the host)",
        "",
        "| variant | attention | parameters | ms / step | × vanilla | CPU ms / step | × vanilla | peak MiB | × vanilla "
        "| aten ops / step | × vanilla | aten calls / step | × vanilla |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        ratio_memory = r["peak_mib"] / base["peak_mib"] if base["peak_mib"] > 0 else float("nan")
        lines.append(
            f"| {r['variant']} | {describe(r['variant'])} | {r['params']:,} | {r['ms']:.1f} | {r['ms'] / base['ms']:.2f} "
            f"| {r['cpu_ms']:.1f} | {r['cpu_ms'] / base['cpu_ms']:.2f} "
            f"| {r['peak_mib']:.0f} | {ratio_memory:.2f} | {r['ops']} | {r['ops'] / base['ops']:.2f} "
            f"| {r['calls']} | {r['calls'] / base['calls']:.2f} |"
        )
    out = args.out or REPO / "results" / f"attention_variants_{args.device}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
