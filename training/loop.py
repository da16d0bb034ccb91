"""The training loop: seeded, token-batched, AMP on CUDA, clipped, validated, checkpointed, resumable.

Run directory layout (runs/NAME):
    recipe.json            the recipe as resolved (overrides applied)
    spm.model              the joint SentencePiece model (trained here if absent)
    log.jsonl              one JSON object a line: train / valid / checkpoint / export events
    checkpoints/           checkpoint_<step>.pt, the newest `keep_last` kept
    model/                 the servable model dir: average of the last `average_last` checkpoints
"""
from __future__ import annotations

import json
import math
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import sacrebleu
import torch
from tqdm import tqdm

from model.tokenizer import Tokenizer
from model.transformer import Transformer
from training import checkpoints as ckpt
from training.data import ParallelDataset, collate, read_parallel, token_batches
from training.losses import label_smoothed_loss
from training.recipe import RecipeError, TrainingRecipe
from training.schedule import inverse_sqrt_schedule
from training.sentencepiece_train import train_sentencepiece
from training.translate import autocast_context, translate_batch

RECIPE_FILE = "recipe.json"
SPM_FILE = "spm.model"
LOG_FILE = "log.jsonl"
CHECKPOINT_DIR = "checkpoints"
MODEL_DIR = "model"


@dataclass
class TrainResult:
    run_dir: Path
    step: int
    model_dir: Path | None
    events: list[dict[str, Any]] = field(default_factory=list)


def resolve_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name not in ("cpu", "cuda") and not name.startswith("cuda:"):
        raise RecipeError([f"--device must be auto, cpu or cuda, got {name!r}"], "--device")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RecipeError(["CUDA was asked for but torch sees no CUDA device"], "--device")
    return torch.device(name)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)  # seeds every CUDA device too


class RunLog:
    """Appends JSON lines to log.jsonl and keeps them in memory for the caller."""

    def __init__(self, path: Path, echo: bool):
        self.path = path
        self.echo = echo
        self.events: list[dict[str, Any]] = []

    def write(self, event: str, **fields: Any) -> dict[str, Any]:
        record = {"event": event, **fields, "time": round(time.time(), 3)}
        self.events.append(record)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, sort_keys=False) + "\n")
        return record

    def say(self, line: str) -> None:
        if self.echo:
            tqdm.write(line, file=sys.stderr)


@dataclass
class Data:
    tokenizer: Tokenizer
    spm_path: Path
    train: ParallelDataset
    valid: ParallelDataset
    bleu_src: list[str]
    bleu_ref: list[str]


def prepare_data(recipe: TrainingRecipe, run_dir: Path, log: RunLog) -> Data:
    """Read the splits, train the SentencePiece model into the run dir if it is not there yet, encode."""
    r = recipe
    train_src, train_tgt = read_parallel(r.data_dir, r.train_split, r.source_lang, r.target_lang, r.train_limit)
    valid_src, valid_tgt = read_parallel(r.data_dir, r.valid_split, r.source_lang, r.target_lang, r.valid_limit)
    spm_path = run_dir / SPM_FILE
    if not spm_path.exists():
        started = time.perf_counter()
        train_sentencepiece(train_src + train_tgt, spm_path, vocab_size=r.spm_vocab_size,
                            model_type=r.spm_model_type, character_coverage=r.spm_character_coverage,
                            byte_fallback=r.spm_byte_fallback, seed=r.seed)
        log.say(f"trained SentencePiece model {spm_path} in {time.perf_counter() - started:.1f}s")
    tokenizer = Tokenizer(spm_path)
    encode = tokenizer.encode_batch
    train = ParallelDataset(encode(train_src), encode(train_tgt), r.max_len)
    valid = ParallelDataset(encode(valid_src), encode(valid_tgt), r.max_len)
    n = r.val_bleu_sentences
    log.write("data", train_pairs=len(train), train_dropped=train.dropped, valid_pairs=len(valid),
              vocab_size=tokenizer.vocab_size, bleu_sentences=min(n, len(valid_src)))
    return Data(tokenizer, spm_path, train, valid, valid_src[:n], valid_tgt[:n])


def validate(model: Transformer, data: Data, recipe: TrainingRecipe, device: torch.device, amp: bool) -> dict[str, Any]:
    """Validation loss / nll per token over the whole validation set, and cased sacreBLEU on the first
    `val_bleu_sentences` sentences (beam `val_beam`)."""
    model.eval()
    loss_sum = nll_sum = 0.0
    tokens = 0
    batches = token_batches(data.valid.src_lengths(), data.valid.tgt_lengths(), recipe.max_tokens,
                            seed=recipe.seed, epoch=0, shuffle=False)
    with torch.inference_mode():
        for idx in batches:
            batch = collate([data.valid[i] for i in idx], idx)
            n = batch.n_tgt_tokens
            batch = batch.to(device)
            with autocast_context(device, amp):
                logits = model(batch.src, batch.tgt_in).logits
            out = label_smoothed_loss(logits, batch.tgt_out, smoothing=recipe.label_smoothing, n_tokens=n)
            loss_sum += float(out.loss) * n
            nll_sum += float(out.nll) * n
            tokens += n
    result: dict[str, Any] = {"loss": loss_sum / max(tokens, 1), "nll": nll_sum / max(tokens, 1)}
    result["ppl"] = math.exp(min(result["nll"], 50.0))
    if data.bleu_src:
        hyps = translate_batch(model, data.tokenizer, data.bleu_src, recipe.val_beam, batch_size=128,
                               max_length_ratio=recipe.decode_max_len_a, max_length_offset=recipe.decode_max_len_b,
                               amp=amp)
        metric = sacrebleu.metrics.BLEU()
        result["bleu"] = round(metric.corpus_score(hyps, [data.bleu_ref]).score, 2)
        result["bleu_signature"] = str(metric.get_signature())
        result["bleu_sentences"] = len(hyps)
        result["bleu_beam"] = recipe.val_beam
    model.train()
    return result


def _prepare_run_dir(recipe: TrainingRecipe, run_dir: Path, resume: bool) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    existing = ckpt.list_checkpoints(run_dir / CHECKPOINT_DIR)
    if existing and not resume:
        raise RecipeError([f"{run_dir} already holds checkpoints; pass --resume to continue it or choose another --out"],
                          "--out")
    (run_dir / RECIPE_FILE).write_text(json.dumps(recipe.to_dict(), indent=2) + "\n")


def train(recipe: TrainingRecipe, run_dir: str | Path, *, device: str = "auto", resume: bool = False,
          progress: bool = True, export: bool = True) -> TrainResult:
    """Train `recipe` into `run_dir`; with `resume`, continue from the newest checkpoint there (model,
    optimizer, scheduler, step, epoch, position in the epoch, RNG states), so that the run follows
    the same schedule and batch order as one that was never interrupted."""
    run_dir = Path(run_dir)
    dev = resolve_device(device)
    amp = dev.type == "cuda" and recipe.amp == "bf16"
    _prepare_run_dir(recipe, run_dir, resume)
    log = RunLog(run_dir / LOG_FILE, echo=progress)
    seed_everything(recipe.seed)
    data = prepare_data(recipe, run_dir, log)

    # Seed again so that the initial weights do not depend on what data preparation consumed.
    seed_everything(recipe.seed)
    config = recipe.model_config(data.tokenizer.vocab_size)
    model = Transformer(config).to(dev)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    # Adam with decoupled weight decay (AdamW); weight_decay = 0 is plain Adam.
    optimizer = torch.optim.AdamW(params, lr=recipe.lr, betas=recipe.betas, eps=recipe.adam_eps,
                                  weight_decay=recipe.weight_decay, fused=dev.type == "cuda")
    scheduler = inverse_sqrt_schedule(optimizer, recipe.warmup)
    step, epoch, batch_in_epoch = 0, 1, 0

    ckpt_dir = run_dir / CHECKPOINT_DIR
    latest = ckpt.list_checkpoints(ckpt_dir)
    if resume and latest:
        payload = ckpt.load_checkpoint(latest[-1], map_location=dev)
        if payload["config"] != config.to_dict():
            raise RecipeError([f"{latest[-1]} was trained with a different model config than the recipe gives"], "--resume")
        model.load_state_dict(payload["model"])
        optimizer.load_state_dict(payload["optimizer"])
        scheduler.load_state_dict(payload["scheduler"])
        step, epoch, batch_in_epoch = payload["step"], payload["epoch"], payload["batch_in_epoch"]
        ckpt.restore_rng_states(payload["rng"])
        log.write("resume", step=step, epoch=epoch, batch_in_epoch=batch_in_epoch, checkpoint=latest[-1].name)
    log.write("start", step=step, device=str(dev), amp="bf16" if amp else "off",
              parameters=sum(p.numel() for p in params), recipe=recipe.name)

    def save(step: int) -> None:
        path = ckpt.save_checkpoint(ckpt_dir / ckpt.checkpoint_name(step), model=model, optimizer=optimizer,
                                    scheduler=scheduler, step=step, epoch=epoch, batch_in_epoch=batch_in_epoch,
                                    config=config.to_dict(), recipe=recipe.to_dict())
        ckpt.prune_checkpoints(ckpt_dir, recipe.keep_last)
        log.write("checkpoint", step=step, path=str(path.relative_to(run_dir)))

    def run_validation(step: int) -> None:
        result = validate(model, data, recipe, dev, amp)
        record = log.write("valid", step=step, epoch=epoch, **result)
        bleu = f" bleu {record['bleu']:.2f}" if "bleu" in record else ""
        log.say(f"step {step} valid loss {record['loss']:.3f} nll {record['nll']:.3f} ppl {record['ppl']:.2f}{bleu}")

    bar = tqdm(total=recipe.max_updates, initial=step, disable=not progress or None, unit="upd",
               dynamic_ncols=True, file=sys.stderr)
    loss_acc = torch.zeros((), device=dev)
    nll_acc = torch.zeros((), device=dev)
    tokens_acc = 0
    interval_start = time.perf_counter()
    last_saved = last_validated = step if resume else -1
    while step < recipe.max_updates:
        batches = token_batches(data.train.src_lengths(), data.train.tgt_lengths(), recipe.max_tokens,
                                seed=recipe.seed, epoch=epoch)
        for i in range(batch_in_epoch, len(batches)):
            idx = batches[i]
            batch = collate([data.train[j] for j in idx], idx)
            n_tokens = batch.n_tgt_tokens  # counted on the CPU: no device sync per step
            batch = batch.to(dev)
            with autocast_context(dev, amp):
                logits = model(batch.src, batch.tgt_in).logits
            out = label_smoothed_loss(logits, batch.tgt_out, smoothing=recipe.label_smoothing, n_tokens=n_tokens)
            optimizer.zero_grad(set_to_none=True)
            out.loss.backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(params, recipe.clip_norm if recipe.clip_norm > 0 else math.inf)
            optimizer.step()
            scheduler.step()
            step += 1
            batch_in_epoch = i + 1
            loss_acc += out.loss.detach() * n_tokens
            nll_acc += out.nll * n_tokens
            tokens_acc += n_tokens
            bar.update(1)

            if step % recipe.log_interval == 0 or step == recipe.max_updates:
                elapsed = time.perf_counter() - interval_start
                record = log.write("train", step=step, epoch=epoch, loss=float(loss_acc) / tokens_acc,
                                   nll=float(nll_acc) / tokens_acc, lr=optimizer.param_groups[0]["lr"],
                                   grad_norm=float(grad_norm), tokens_per_s=round(tokens_acc / max(elapsed, 1e-9), 1),
                                   tokens=tokens_acc)
                bar.set_postfix(loss=f"{record['loss']:.3f}", lr=f"{record['lr']:.2e}",
                                tok_s=f"{record['tokens_per_s']:.0f}", refresh=False)
                if bar.disable:
                    log.say(f"step {step} loss {record['loss']:.3f} lr {record['lr']:.2e} "
                            f"{record['tokens_per_s']:.0f} tok/s")
                loss_acc.zero_()
                nll_acc.zero_()
                tokens_acc = 0
                interval_start = time.perf_counter()
            paused = time.perf_counter()
            if step % recipe.checkpoint_interval == 0 or step == recipe.max_updates:
                save(step)
                last_saved = step
            if step % recipe.val_interval == 0 or step == recipe.max_updates:
                run_validation(step)
                last_validated = step
            interval_start += time.perf_counter() - paused  # tokens/s counts training time only
            if step >= recipe.max_updates:
                break
        else:
            # The epoch ran out before max_updates.
            if recipe.val_every_epoch and last_validated != step:
                paused = time.perf_counter()
                run_validation(step)
                last_validated = step
                interval_start += time.perf_counter() - paused
            epoch += 1
            batch_in_epoch = 0
    bar.close()
    if last_saved != step:
        save(step)
    if last_validated != step:
        run_validation(step)

    model_dir = None
    if export:
        from training.finalize import average_and_export  # late import: it needs the run's checkpoints

        model_dir, info = average_and_export(run_dir, recipe.average_last, run_dir / MODEL_DIR,
                                             fp16=recipe.export_fp16, device=str(dev), data=data, recipe=recipe)
        log.write("export", step=step, **info)
        log.say(f"wrote {model_dir} (average of {len(info['averaged'])} checkpoints"
                + (f", val BLEU {info['val_bleu']:.2f})" if "val_bleu" in info else ")"))
    return TrainResult(run_dir, step, model_dir, log.events)


def read_log(run_dir: str | Path, event: str | None = None) -> list[dict[str, Any]]:
    path = Path(run_dir) / LOG_FILE
    lines: Iterable[str] = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    records = [json.loads(line) for line in lines if line.strip()]
    return [r for r in records if event is None or r["event"] == event]
