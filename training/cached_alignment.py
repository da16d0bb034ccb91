"""Training an added supervised alignment head on the cached features of a frozen model.

With `"trainable": ["supervised_alignment."]` the frozen model's encoder output and decoder
layer L's output need no gradient, so one forward pass over the training split computes them for
a whole epoch of updates of the head alone: the loss of a batch is exactly the alignment part of
what `python -m training train --init MODEL` computes on it (tests/training/test_cached_alignment.py),
at a fraction of the cost on a CPU. Without dropout one pass serves every epoch; with the recipe's
dropout (a regulariser the head needs out of domain: results/alignment.md) each epoch draws its own. The labels, the loss (`training.losses.
supervised_alignment_loss`, Garg et al. 2019 eq. 5), the optimiser (AdamW) and the schedule
(inverse square root) are the training loop's.

    python -m training.cached_alignment --recipe recipes/align-context-head-tiny-en-de.json \\
        --init models/en-de --out models/en-de-align2 --epochs 6
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from model.model_dir import load_model_dir, save_model_dir
from model.config import ModelConfig
from model.decoding.finished_alignment import layer_features
from model.transformer import Transformer
from training.alignment_labels import piece_links, read_labels, target_rows
from training.data import ParallelDataset, read_parallel
from training.losses import supervised_alignment_loss
from training.recipe import RecipeError, load_recipe
from training.schedule import inverse_sqrt_schedule


@dataclass(frozen=True)
class FeatureCache:
    """Per training pair: the encoder output (S + 1, D) (EOS included), decoder layer L's output
    (T + 1, D) (row 0 reads BOS), both float16, and its (source piece, target piece) label links."""

    memory: list[torch.Tensor]
    states: list[torch.Tensor]
    links: list[list[tuple[int, int]]]


@dataclass(frozen=True)
class CachedBatch:
    memory: torch.Tensor  # (B, S, D)
    memory_pad: torch.Tensor  # (B, S) True = padding
    states: torch.Tensor  # (B, T, D)
    target_pad: torch.Tensor  # (B, T) True = padding
    targets: torch.Tensor  # (B, T, S) label rows (target_rows)


def padded(ids: Sequence[Sequence[int]], pad_id: int) -> torch.Tensor:
    width = max(len(row) for row in ids)
    out = torch.full((len(ids), width), pad_id, dtype=torch.long)  # (B, W)
    for b, row in enumerate(ids):
        out[b, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out


def cache_features(model: Transformer, src_ids: Sequence[Sequence[int]], tgt_ids: Sequence[Sequence[int]],
                   links: Sequence[list[tuple[int, int]]], batch_size: int = 128, dropout: bool = False,
                   dtype: torch.dtype = torch.float16) -> FeatureCache:
    """One pass of the frozen model over the pairs (piece ids without specials): in eval mode, or
    with `dropout` in train mode (the config's dropouts drawn once for this pass); stored as `dtype`
    (float16 halves the memory; float32 keeps the training loop's numbers exactly)."""
    c = model.config
    model.train(dropout)
    memory: list[torch.Tensor | None] = [None] * len(src_ids)
    states: list[torch.Tensor | None] = [None] * len(src_ids)
    order = sorted(range(len(src_ids)), key=lambda i: (len(tgt_ids[i]), len(src_ids[i])))
    for start in range(0, len(order), batch_size):
        chosen = order[start : start + batch_size]
        src = padded([[*src_ids[i], c.eos_id] for i in chosen], c.pad_id)  # (B, S)
        tgt_in = padded([[c.bos_id, *tgt_ids[i]] for i in chosen], c.pad_id)  # (B, T)
        with torch.inference_mode():
            memory_out, dec = layer_features(model, src, tgt_in)
        enc = memory_out.states
        for row, i in enumerate(chosen):
            memory[i] = enc[row, : len(src_ids[i]) + 1].to(dtype).clone()
            states[i] = dec[row, : len(tgt_ids[i]) + 1].to(dtype).clone()
    return FeatureCache(memory, states, [list(pairs) for pairs in links])  # type: ignore[arg-type]


def cached_batch(cache: FeatureCache, indices: Sequence[int]) -> CachedBatch:
    memory = torch.nn.utils.rnn.pad_sequence([cache.memory[i].float() for i in indices], batch_first=True)
    states = torch.nn.utils.rnn.pad_sequence([cache.states[i].float() for i in indices], batch_first=True)
    s_len = torch.tensor([cache.memory[i].shape[0] for i in indices])
    t_len = torch.tensor([cache.states[i].shape[0] for i in indices])
    memory_pad = torch.arange(memory.shape[1])[None, :] >= s_len[:, None]  # (B, S)
    target_pad = torch.arange(states.shape[1])[None, :] >= t_len[:, None]  # (B, T)
    targets = target_rows([cache.links[i] for i in indices], states.shape[1], memory.shape[1])  # (B, T, S)
    return CachedBatch(memory, memory_pad, states, target_pad, targets)


def cached_loss(model: Transformer, batch: CachedBatch) -> torch.Tensor:
    """The supervised alignment loss of the model's added head on a cached batch."""
    head = model.supervised_alignment
    attention = head.attend(batch.states, head.keys(batch.memory), batch.memory_pad, batch.target_pad)  # (B, T, S)
    return supervised_alignment_loss(attention, batch.targets)


def token_batches(cache: FeatureCache, max_tokens: int, rng: random.Random) -> list[list[int]]:
    """Pairs sorted by target length (ties shuffled), cut into batches of at most `max_tokens`
    padded target rows, in a shuffled order."""
    order = sorted(range(len(cache.states)), key=lambda i: (cache.states[i].shape[0], rng.random()))
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        if current and (len(current) + 1) * cache.states[i].shape[0] > max_tokens:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    rng.shuffle(batches)
    return batches


def train_head(model: Transformer, features: FeatureCache | Callable[[int], FeatureCache], *, epochs: int, lr: float, warmup: int,
               max_tokens: int, betas: tuple[float, float] = (0.9, 0.98), eps: float = 1e-8,
               clip_norm: float = 1.0, seed: int = 1, log=print) -> list[float]:
    """Train the model's supervised_alignment parameters (everything else frozen) for `epochs`
    passes over the cache (or over `features(epoch)`, a fresh one each epoch); returns each epoch's
    mean loss per batch."""
    for name, p in model.named_parameters():
        p.requires_grad_(name.startswith("supervised_alignment."))
    params = [p for p in model.supervised_alignment.parameters()]
    optimizer = torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=0.0)
    scheduler = inverse_sqrt_schedule(optimizer, warmup)
    rng = random.Random(seed)
    torch.manual_seed(seed)
    losses: list[float] = []
    for epoch in range(1, epochs + 1):
        cache = features(epoch) if callable(features) else features
        model.train()
        started, total, batches = time.perf_counter(), 0.0, token_batches(cache, max_tokens, rng)
        for indices in batches:
            loss = cached_loss(model, cached_batch(cache, indices))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, clip_norm)
            optimizer.step()
            scheduler.step()
            total += float(loss.detach())
        losses.append(total / len(batches))
        log(f"epoch {epoch}: {len(batches)} updates, alignment loss {losses[-1]:.4f} "
            f"({time.perf_counter() - started:.0f} s)")
    model.eval()
    return losses


def sampled_pairs(total: int, count: int, seed: int) -> list[int]:
    """`count` distinct pair indices of `total` (all when count >= total), drawn with `seed`, in
    increasing order: a corpus grouped by package (data/debian_catalogs) would give a prefix
    (the recipe's train_limit) its first packages only."""
    return sorted(random.Random(seed).sample(range(total), min(count, total)))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m training.cached_alignment", description=__doc__.split("\n\n")[0])
    p.add_argument("--recipe", required=True, type=Path, help="a recipe whose model adds a supervised head 'added'")
    p.add_argument("--init", required=True, type=Path, help="the frozen model directory")
    p.add_argument("--out", required=True, type=Path, help="the model directory to write")
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--sample", type=int, default=None, metavar="N",
                   help="train on N training pairs drawn at random (the recipe's seed) instead of all: the "
                        "features of a large corpus would not fit in memory, and a head of 4 x D x D weights "
                        "learns from far fewer pairs")
    return p


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    torch.set_num_threads(args.threads)
    recipe = load_recipe(args.recipe)
    options = recipe.model.get("supervised_alignment")
    if not options or options.get("head") != "added":
        raise RecipeError(["the recipe's model must add a supervised alignment head (\"head\": \"added\")"],
                          "model.supervised_alignment")
    if recipe.trainable != ["supervised_alignment."]:
        raise RecipeError(["cached features need a frozen model: \"trainable\": [\"supervised_alignment.\"]"],
                          "trainable")
    initial = load_model_dir(args.init)
    config = ModelConfig.from_dict({**initial.config.to_dict(), **recipe.model})
    model = Transformer(config)
    missing = model.load_state_dict(initial.model.state_dict(), strict=False).missing_keys
    if any(not name.startswith("supervised_alignment.") for name in missing):
        raise RecipeError([f"--init lacks weights {missing}"], "--init")
    src, tgt = read_parallel(recipe.data_dir, recipe.train_split, recipe.source_lang, recipe.target_lang,
                             recipe.train_limit)
    words = read_labels(recipe.data_dir, recipe.train_split, recipe.source_lang, recipe.target_lang)
    if args.sample is not None:
        if args.sample < 1:
            raise RecipeError([f"must be at least 1, not {args.sample}"], "--sample")
        chosen = sampled_pairs(len(src), args.sample, recipe.seed)
        src, tgt, words = [src[i] for i in chosen], [tgt[i] for i in chosen], [words[i] for i in chosen]
    tokenizer = initial.tokenizer
    data = ParallelDataset(tokenizer.encode_batch(src), tokenizer.encode_batch(tgt), recipe.max_len)
    links = [piece_links(src[i], tgt[i], words[i], tokenizer) for i in data.kept]
    torch.manual_seed(recipe.seed)
    dropout = any(getattr(config, name) > 0 for name in ("dropout", "attention_dropout", "activation_dropout"))

    def features(epoch: int) -> FeatureCache:
        started = time.perf_counter()
        cache = cache_features(model, data.src, data.tgt, links, dropout=dropout)
        print(f"epoch {epoch}: features of {len(data)} pairs{' (dropout drawn)' if dropout else ''} in "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
        return cache

    # With dropout the frozen model's features differ at every update of the real training path;
    # here each epoch draws them once. Without, one pass serves every epoch.
    losses = train_head(model, features if dropout else features(0), epochs=args.epochs, lr=recipe.lr, warmup=recipe.warmup,
                        max_tokens=recipe.max_tokens, betas=tuple(recipe.betas), eps=recipe.adam_eps,
                        clip_norm=recipe.clip_norm, seed=recipe.seed,
                        log=lambda line: print(line, file=sys.stderr))
    extra = {"training": {"recipe": recipe.to_dict(), "init": str(args.init), "trainer": "training.cached_alignment",
                          "epochs": args.epochs, "sample": args.sample, "epoch_losses": [round(x, 4) for x in losses]}}
    save_model_dir(args.out, model, initial.path / "spm.model", source_lang=recipe.source_lang,
                   target_lang=recipe.target_lang, dtype=torch.float16 if recipe.export_fp16 else torch.float32,
                   extra=extra)
    print(json.dumps({"out": str(args.out), "epoch_losses": losses}))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return run(argv)
    except RecipeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
