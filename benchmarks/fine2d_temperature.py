"""How sharp a fresh fine2d cross-attention layer is, against a fresh vanilla one (Choi et al.'s
fine-grained attention, model/attention/fine2d_functional.py, option "scale").

    python benchmarks/fine2d_temperature.py          # appends to results/fine2d_temperature.md

For each seed: a freshly initialised attention module (the model's xavier-uniform weights and zero
biases, d_model and heads of recipes/fine2d-cross-tiny-en-de.json), queries and keys drawn as
LayerNorm'd Gaussian rows (what a pre-norm sublayer sees), B = 16 sentences of T = S = 20 tokens.
Reported, averaged over seeds: the spread of a logit row over the source positions (std over s,
averaged over rows, i.e. over (b, h, t) for vanilla and (b, h, d, t) for fine2d) and the entropy
of the softmax over s (maximum ln S = 3.00, a uniform row).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from model.attention.fine2d import Fine2dAttention  # noqa: E402
from model.attention.fine2d_functional import fine2d_mlp_scores, fine2d_scores  # noqa: E402
from model.attention.functional import split_heads  # noqa: E402
from model.attention.vanilla import VanillaAttention  # noqa: E402
from host import append_report, cpu_name  # noqa: E402  (benchmarks/host.py: the script's own folder is on sys.path)

RECIPE = REPO / "recipes" / "fine2d-cross-tiny-en-de.json"
RESULTS = REPO / "results" / "fine2d_temperature.md"


def fresh(module: nn.Module) -> nn.Module:
    """The model's initialisation (`Transformer._init_linear_weights`)."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    return module.eval()


def row_stats(logits: torch.Tensor) -> tuple[float, float]:
    """logits (…, S) -> (std over S averaged over rows, entropy of softmax over S averaged over rows)."""
    p = torch.softmax(logits, dim=-1)
    entropy = -(p * torch.log(p.clamp_min(1e-30))).sum(-1)
    return logits.std(dim=-1, unbiased=False).mean().item(), entropy.mean().item()


@torch.no_grad()
def measure(d_model: int, heads: int, seed: int, batch: int = 16, length: int = 20) -> dict[str, tuple[float, float]]:
    torch.manual_seed(seed)
    x = F.layer_norm(torch.randn(batch, length, d_model), (d_model,))  # (B, T, D) queries' input
    memory = F.layer_norm(torch.randn(batch, length, d_model), (d_model,))  # (B, S, D)
    dh = d_model // heads
    vanilla = fresh(VanillaAttention(d_model, heads, 0.0, "cross", {}))
    q = split_heads(vanilla.q_proj(x), heads)  # (B, H, T, dh)
    k = split_heads(vanilla.k_proj(memory), heads)  # (B, H, S, dh)
    out = {"vanilla": row_stats(q @ k.transpose(-2, -1) / math.sqrt(dh))}  # (B, H, T, S)
    for scale in ("per_dimension", "sqrt_head_dim"):
        for key_term in (True, False):
            fine = fresh(Fine2dAttention(d_model, heads, 0.0, "cross", {"scale": scale, "key_term": key_term}))
            q = split_heads(fine.q_proj(x), heads)  # (B, H, T, dh)
            k = split_heads(fine.k_proj(memory), heads)  # (B, H, S, dh)
            r = split_heads(fine.r_proj(memory), heads) if key_term else None  # (B, H, S, dh)
            name = f"fine2d scale={scale}" + ("" if key_term else ", key_term=false")
            out[name] = row_stats(fine2d_scores(q, k, r, fine.scale))  # (B, H, dh, T, S)
    fine = fresh(Fine2dAttention(d_model, heads, 0.0, "cross", {"score": "mlp"}))
    q = split_heads(fine.q_proj(x), heads)  # (B, H, T, dh)
    k = split_heads(fine.k_proj(memory), heads)  # (B, H, S, dh)
    out["fine2d score=mlp (the paper's f^d)"] = row_stats(fine2d_mlp_scores(q, k, fine.score_weight))  # (B, H, dh, T, S)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = json.loads(RECIPE.read_text())["model"]
    d_model, heads = model["d_model"], model["n_heads"]
    runs = [measure(d_model, heads, seed) for seed in range(args.seeds)]
    rows = [f"| {name} | {sum(r[name][0] for r in runs) / len(runs):.3f} | {sum(r[name][1] for r in runs) / len(runs):.3f} |"
            for name in runs[0]]
    text = "\n".join([
        f"\n## {datetime.date.today().isoformat()} — {cpu_name()}, torch {torch.__version__}",
        "",
        f"Command: `python benchmarks/fine2d_temperature.py --seeds {args.seeds}`; d_model {d_model}, "
        f"{heads} heads (dₕ {d_model // heads}), B 16, T = S = 20, mean over {args.seeds} seeds.",
        "",
        "| fresh layer | logit std over s | softmax entropy over s (max ln 20 = 2.996) |",
        "|---|---:|---:|",
        *rows,
        "",
    ])
    print(text)
    if not args.no_write:
        append_report(RESULTS, "How sharp a fresh fine2d layer is (benchmarks/fine2d_temperature.py)",
                      "python benchmarks/fine2d_temperature.py", text)


if __name__ == "__main__":
    main()
