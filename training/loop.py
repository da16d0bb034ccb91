"""The training loop: seeded, token-batched, AMP on CUDA, clipped, validated, checkpointed, resumable.

`fit` drives an `Objective` (what one update computes and how validation looks): the one-direction
`DirectionalObjective` here, the two-model `training.symmetric.SymmetricObjective`. Both share
everything else: batches, optimizer and schedule, logging and progress bar, checkpoints, resume.

Run directory layout (runs/NAME):
    recipe.json            the recipe as resolved (overrides applied)
    spm.model              the joint SentencePiece model (trained here if absent)
    log.jsonl              one JSON object a line: train / valid / checkpoint / export events
    checkpoints/           checkpoint_<step>.pt, the newest `keep_last` kept
    model/                 the servable model dir: average of the last `average_last` checkpoints
                           (a symmetric run writes models/<src>-<tgt> and models/<tgt>-<src> instead)
"""
from __future__ import annotations

import json
import math
import random
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch
from tqdm import tqdm

from model.attention.kernels import avoid_per_shape_attention_plans
from model.config import ModelConfig
from model.cpu_allocator import retain_freed_memory
from model.text.tokenizer import Tokenizer
from model.transformer import Transformer
from training import checkpoints as ckpt
from training.alignment_labels import LabelError, labels_path, piece_links, read_labels, target_rows
from training.data import Batch, Data, ParallelDataset, collate, read_parallel, read_training_text, token_batches
from training.distributed import SINGLE, ProcessGroup, gradient_sync, join_from_environment, shard, wrap
from training.finalize import average_and_save
from training.recipe import RecipeError, TrainingRecipe
from training.schedule import inverse_sqrt_schedule
from training.sentencepiece_train import train_sentencepiece
from training.validation import direction_loss, validate

RECIPE_FILE = "recipe.json"
SPM_FILE = "spm.model"
LOG_FILE = "log.jsonl"
CHECKPOINT_DIR = "checkpoints"
MODEL_DIR = "model"
DIRECTIONAL = "directional"


@dataclass
class TrainResult:
    run_dir: Path
    step: int
    model_dir: Path | None
    events: list[dict[str, Any]] = field(default_factory=list)
    # A symmetric run's model dirs by direction ("en-de": ...); model_dir is None there.
    model_dirs: dict[str, Path] = field(default_factory=dict)


def resolve_device(name: str = "auto") -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name not in ("cpu", "cuda") and not name.startswith("cuda:"):
        raise RecipeError([f"--device must be auto, cpu or cuda, got {name!r}"], "--device")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise RecipeError(["CUDA was asked for but torch sees no CUDA device"], "--device")
    device = torch.device(name)
    avoid_per_shape_attention_plans(device)
    if device.type == "cpu":
        # A CPU step frees and maps again blocks of hundreds of MB (the logits and their gradient):
        # 46 million page faults and a quarter of the CPU time in the kernel in 200 updates of the
        # software recipe; kept in the heap, the same updates gave 1.39x the tokens/s (results/cpu_training_allocator.md).
        retain_freed_memory(heap_only=True)
    return device


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)  # seeds every CUDA device too


class RunLog:
    """Appends JSON lines to log.jsonl and keeps them in memory for the caller. Only the main
    process of a multi-process run writes (`enabled`); the others keep their events in memory."""

    def __init__(self, path: Path, echo: bool, enabled: bool = True):
        self.path = path
        self.echo = echo and enabled
        self.enabled = enabled
        self.events: list[dict[str, Any]] = []

    def write(self, event: str, **fields: Any) -> dict[str, Any]:
        record = {"event": event, **fields, "time": round(time.time(), 3)}
        self.events.append(record)
        if self.enabled:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record, sort_keys=False) + "\n")
        return record

    def say(self, line: str) -> None:
        if self.echo:
            tqdm.write(line, file=sys.stderr)


def prepare_data(recipe: TrainingRecipe, run_dir: Path, log: RunLog, alignment_labels: bool = False) -> Data:
    """Read the splits, train the SentencePiece model into the run dir if it is not there yet, encode;
    with `alignment_labels`, also map the split's cached eflomal labels to pieces."""
    r = recipe
    if r.train_mix and alignment_labels:
        raise RecipeError(["train_mix: the alignment labels cover train_split only; leave train_mix out"])
    train_src, train_tgt = read_training_text(r)
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
    labels = None
    if alignment_labels:
        words = read_labels(r.data_dir, r.train_split, r.source_lang, r.target_lang)
        labels = [piece_links(train_src[i], train_tgt[i], words[i], tokenizer) for i in train.kept]
        log.write("alignment_labels", pairs=len(labels), links=sum(len(links) for links in labels),
                  path=str(labels_path(r.data_dir, r.train_split, r.source_lang, r.target_lang)))
    log.write("data", train_pairs=len(train), train_dropped=train.dropped, valid_pairs=len(valid),
              vocab_size=tokenizer.vocab_size, bleu_sentences=min(n, len(valid_src)))
    return Data(tokenizer, spm_path, train, valid, valid_src[:n], valid_tgt[:n], labels)


def reversed_data(data: Data) -> Data:
    """The same data the other way round (target -> source), for the second model of a symmetric run."""
    return Data(data.tokenizer, data.spm_path, ParallelDataset(data.train.tgt, data.train.src),
                ParallelDataset(data.valid.tgt, data.valid.src), data.bleu_ref, data.bleu_src)


def _prepare_run_dir(recipe: TrainingRecipe, run_dir: Path, resume: bool) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    existing = ckpt.list_checkpoints(run_dir / CHECKPOINT_DIR)
    if existing and not resume:
        raise RecipeError([f"{run_dir} already holds checkpoints; pass --resume to continue it or choose another --out"],
                          "--out")
    (run_dir / RECIPE_FILE).write_text(json.dumps(recipe.to_dict(), indent=2) + "\n")


@dataclass
class Session:
    """What every kind of training sets up the same way before it builds its models."""

    recipe: TrainingRecipe
    run_dir: Path
    device: torch.device
    amp: bool
    log: RunLog
    data: Data
    group: ProcessGroup = SINGLE


def start_session(recipe: TrainingRecipe, run_dir: str | Path, *, device: str, resume: bool, progress: bool,
                  spm_source: Path | None = None) -> Session:
    """Resolve the device, prepare the run dir, open the log, read and encode the data. `spm_source`:
    a SentencePiece model to use instead of training one (the run must not hold a different one)."""
    run_dir = Path(run_dir)
    group, dev = join_from_environment(resolve_device(device))
    amp = dev.type == "cuda" and recipe.amp == "bf16"
    log = RunLog(run_dir / LOG_FILE, echo=progress, enabled=group.is_main)
    if not group.is_main:
        group.barrier()  # the main process has prepared the run dir and the SentencePiece model
    else:
        _prepare_run_dir(recipe, run_dir, resume)
        if spm_source is not None:
            target = run_dir / SPM_FILE
            if target.exists() and target.read_bytes() != Path(spm_source).read_bytes():
                raise RecipeError([f"{target} differs from the SentencePiece model the run was given "
                                   f"({spm_source})"], "--out")
            shutil.copyfile(spm_source, target)
    seed_everything(recipe.seed)
    try:
        data = prepare_data(recipe, run_dir, log, alignment_labels=bool(recipe.model.get("supervised_alignment")))
    except LabelError as error:
        raise RecipeError([str(error)], "model.supervised_alignment") from None
    if group.is_main:
        group.barrier()
    return Session(recipe, run_dir, dev, amp, log, data, group)


class Objective(Protocol):
    """What one kind of training optimises; `fit` runs any of them through the same loop."""

    kind: str                   # written into every checkpoint ("directional", "symmetric")
    module: torch.nn.Module     # what checkpoints hold under "model"
    config: ModelConfig         # the model config, checked when a run resumes

    def parameter_groups(self) -> dict[str, list[torch.nn.Parameter]]:
        """Parameters by group; each group's gradient norm is clipped and logged on its own."""

    def update(self, batch: Batch) -> tuple[torch.Tensor, dict[str, tuple[torch.Tensor, float]], int]:
        """One batch (on the CPU) -> the loss to back-propagate, {name: (weighted sum, weight)} to log
        as sum / weight over the log interval, and the number of predicted tokens (throughput)."""

    def validate(self, step: int, epoch: int) -> None:
        """Validate and write a "valid" event."""


def fit(session: Session, objective: Objective, *, resume: bool, progress: bool) -> int:
    """Optimise `objective` until the recipe's max_updates; returns the update count. With `resume`,
    continue from the newest checkpoint (model, optimizer, scheduler, step, epoch, position in the
    epoch, RNG states), so that the run follows the same schedule and batch order as one that was
    never interrupted."""
    recipe, run_dir, dev, log, data = session.recipe, session.run_dir, session.device, session.log, session.data
    group = session.group
    replicated: torch.nn.Module | None = None  # the DistributedDataParallel wrapper, with several processes
    if group.active:
        if not isinstance(objective, DirectionalObjective):
            raise RecipeError([f"{objective.kind} training runs in one process, not under torchrun"], "--recipe")
        objective.forward_module = replicated = wrap(objective.module, group)
    groups = objective.parameter_groups()
    params = [p for group in groups.values() for p in group]
    # Adam with decoupled weight decay (AdamW); weight_decay = 0 is plain Adam.
    optimizer = torch.optim.AdamW(params, lr=recipe.lr, betas=recipe.betas, eps=recipe.adam_eps,
                                  weight_decay=recipe.weight_decay, **optimizer_kernels(recipe, dev))
    graph_steps = False
    if recipe.compile:
        if not isinstance(objective, DirectionalObjective):
            raise RecipeError([f"compile: {objective.kind} training is not compiled (directional training only)"],
                              "--recipe")
        objective.forward_module, graph_steps = compile_forward(objective.forward_module, recipe.compile_mode, dev)
    scheduler = inverse_sqrt_schedule(optimizer, recipe.warmup)
    step, epoch, batch_in_epoch = 0, 1, 0

    ckpt_dir = run_dir / CHECKPOINT_DIR
    latest = ckpt.list_checkpoints(ckpt_dir)
    if resume and latest:
        payload = ckpt.load_checkpoint(latest[-1], map_location=dev)
        kind = payload.get("extra", {}).get("kind", DIRECTIONAL)
        if kind != objective.kind:
            raise RecipeError([f"{latest[-1]} is from {kind} training, the recipe asks for {objective.kind}"], "--resume")
        if payload["config"] != objective.config.to_dict():
            raise RecipeError([f"{latest[-1]} was trained with a different model config than the recipe gives"], "--resume")
        objective.module.load_state_dict(payload["model"])
        optimizer.load_state_dict(payload["optimizer"])
        scheduler.load_state_dict(payload["scheduler"])
        step, epoch, batch_in_epoch = payload["step"], payload["epoch"], payload["batch_in_epoch"]
        ckpt.restore_rng_states(payload["rng"])
        if not group.is_main:
            # Checkpoints hold the main process's RNG; the others draw their own dropout masks.
            seed_everything(recipe.seed * 1_000_003 + group.rank * 7_919 + step)
        log.write("resume", step=step, epoch=epoch, batch_in_epoch=batch_in_epoch, checkpoint=latest[-1].name)
    elif not group.is_main:
        seed_everything(recipe.seed * 1_000_003 + group.rank * 7_919)
    log.write("start", step=step, device=str(dev), amp="bf16" if session.amp else "off",
              parameters=sum(p.numel() for p in params), recipe=recipe.name, kind=objective.kind,
              processes=group.world, accumulate=recipe.accumulate)

    def save(step: int) -> None:
        if not group.is_main:
            return
        path = ckpt.save_checkpoint(ckpt_dir / ckpt.checkpoint_name(step), model=objective.module, optimizer=optimizer,
                                    scheduler=scheduler, step=step, epoch=epoch, batch_in_epoch=batch_in_epoch,
                                    config=objective.config.to_dict(), recipe=recipe.to_dict(),
                                    extra={"kind": objective.kind})
        ckpt.prune_checkpoints(ckpt_dir, recipe.keep_last)
        log.write("checkpoint", step=step, path=str(path.relative_to(run_dir)))

    bar = tqdm(total=recipe.max_updates, initial=step, disable=not (progress and group.is_main) or None, unit="upd",
               dynamic_ncols=True, file=sys.stderr)
    sums: dict[str, torch.Tensor] = {}
    weights: dict[str, float] = {}
    tokens_acc = 0
    interval_start = time.perf_counter()
    last_saved = last_validated = step if resume else -1
    clip = recipe.clip_norm if recipe.clip_norm > 0 else math.inf
    # Batches one update consumes from the epoch's list, over every process.
    per_update = group.world * recipe.accumulate
    while step < recipe.max_updates:
        batches = token_batches(data.train.src_lengths(), data.train.tgt_lengths(), recipe.max_tokens,
                                seed=recipe.seed, epoch=epoch)
        # An epoch's last batches that cannot fill a whole update are left out: every process must
        # run the same number of backward passes.
        for i in range(batch_in_epoch, len(batches) - per_update + 1, per_update):
            micro = [collate([data.train[j] for j in idx], idx) for idx in shard(batches, i, group, recipe.accumulate)]
            local_tokens = sum(b.n_tgt_tokens for b in micro)
            update_tokens = local_tokens if not group.active else int(group.sum([float(local_tokens)])[0])
            optimizer.zero_grad(set_to_none=True)
            if graph_steps:
                torch.compiler.cudagraph_mark_step_begin()
            for k, batch in enumerate(micro):
                with gradient_sync(replicated, k == len(micro) - 1):
                    loss, tallies, n_tokens = objective.update(batch)  # counts are taken on the CPU: no device sync
                    # Each batch's loss is a mean over its tokens; weighted by its share of the update's
                    # tokens (× processes, which DDP's gradient average divides out), the update's gradient is
                    # that of the mean over all its tokens, as one large batch would give.
                    share = n_tokens * group.world / update_tokens
                    (loss if share == 1 else loss * share).backward()
                for name, (value, weight) in tallies.items():
                    sums[name] = value if name not in sums else sums[name] + value
                    weights[name] = weights.get(name, 0.0) + weight
                tokens_acc += n_tokens
            norms = {name: torch.nn.utils.clip_grad_norm_(params_, clip) for name, params_ in groups.items()}
            optimizer.step()
            scheduler.step()
            step += 1
            batch_in_epoch = i + per_update
            bar.update(1)

            if step % recipe.log_interval == 0 or step == recipe.max_updates:
                elapsed = time.perf_counter() - interval_start
                if group.active:  # the log shows every process's batches, not the main one's alone
                    names = sorted(sums)
                    totals = group.sum([float(sums[n]) for n in names] + [weights[n] for n in names] + [tokens_acc])
                    sums = dict(zip(names, totals[:len(names)]))
                    weights = dict(zip(names, totals[len(names):2 * len(names)]))
                    tokens_acc = int(totals[-1])
                averages = {name: float(total) / max(weights[name], 1e-12) for name, total in sums.items()}
                grad_norms = {("grad_norm" if name == "" else f"grad_norm.{name}"): float(norm)
                              for name, norm in norms.items()}
                record = log.write("train", step=step, epoch=epoch, **averages, lr=optimizer.param_groups[0]["lr"],
                                   **grad_norms, tokens_per_s=round(tokens_acc / max(elapsed, 1e-9), 1),
                                   tokens=tokens_acc)
                shown = {key: f"{record[key]:.3f}" for key in ("loss", "fertility", "alignment", "trace") if key in record}
                bar.set_postfix(**shown, lr=f"{record['lr']:.2e}", tok_s=f"{record['tokens_per_s']:.0f}", refresh=False)
                if bar.disable:
                    log.say(f"step {step} " + " ".join(f"{k} {v}" for k, v in shown.items())
                            + f" lr {record['lr']:.2e} {record['tokens_per_s']:.0f} tok/s")
                sums, weights, tokens_acc = {}, {}, 0
                interval_start = time.perf_counter()
            paused = time.perf_counter()
            if step % recipe.checkpoint_interval == 0 or step == recipe.max_updates:
                save(step)
                last_saved = step
            if step % recipe.val_interval == 0 or step == recipe.max_updates:
                validate_on_main(objective, group, step, epoch)
                last_validated = step
            interval_start += time.perf_counter() - paused  # tokens/s counts training time only
            if step >= recipe.max_updates:
                break
        else:
            # The epoch ran out before max_updates.
            if recipe.val_every_epoch and last_validated != step:
                paused = time.perf_counter()
                validate_on_main(objective, group, step, epoch)
                last_validated = step
                interval_start += time.perf_counter() - paused
            epoch += 1
            batch_in_epoch = 0
    bar.close()
    if last_saved != step:
        save(step)
    if last_validated != step:
        validate_on_main(objective, group, step, epoch)
    return step


def compile_forward(module: torch.nn.Module, mode: str, device: torch.device) -> tuple[torch.nn.Module, bool]:
    """`module` through torch.compile in `mode` with dynamic shapes (one graph for the batch shapes'
    family rather than one per (B, S, T) bucket), and whether its passes are CUDA-graph replays
    (reduce-overhead on CUDA). A replay reuses the memory of the one before: the caller starts a new
    step (`torch.compiler.cudagraph_mark_step_begin`) once an update's gradients are set to None,
    never between the micro-batches whose gradients add up."""
    return torch.compile(module, dynamic=True, mode=mode), mode == "reduce-overhead" and device.type == "cuda"


def optimizer_kernels(recipe: TrainingRecipe, device: torch.device) -> dict[str, bool]:
    """AdamW's implementation arguments for `recipe.optimizer_implementation` on `device`."""
    choice = recipe.optimizer_implementation
    if choice == "auto":
        return {"fused": device.type == "cuda"}
    return {"fused": True} if choice == "fused" else {"fused": False, "foreach": True}


def validate_on_main(objective: Objective, group: ProcessGroup, step: int, epoch: int) -> None:
    """Validation runs in the main process; the others wait for it."""
    if group.is_main:
        objective.validate(step, epoch)
    group.barrier()


class DirectionalObjective:
    """One model, source -> target: label-smoothed cross-entropy per target token, plus the global
    fertility weight × its term (`training.losses.global_fertility_term`) when the model config has
    global fertility."""

    kind = DIRECTIONAL

    def __init__(self, model: Transformer, session: Session):
        self.module = model
        # What the forward pass runs through: the model, or its DistributedDataParallel wrapper.
        self.forward_module: torch.nn.Module = model
        self.config = model.config
        self.session = session

    def parameter_groups(self) -> dict[str, list[torch.nn.Parameter]]:
        return {"": [p for p in self.module.parameters() if p.requires_grad]}

    def update(self, batch: Batch) -> tuple[torch.Tensor, dict[str, tuple[torch.Tensor, float]], int]:
        n_tokens, n_source = batch.n_tgt_tokens, batch.n_src_tokens
        targets = self.alignment_targets(batch)
        out = direction_loss(self.module, batch.to(self.session.device), n_tokens,
                             smoothing=self.session.recipe.label_smoothing, amp=self.session.amp,
                             forward=self.forward_module, alignment_targets=targets, n_source=n_source)
        tallies = {"loss": (out.xent.loss.detach() * n_tokens, n_tokens), "nll": (out.xent.nll * n_tokens, n_tokens)}
        if out.fertility is not None:
            tallies["fertility"] = (out.fertility.detach() * n_source, n_source)
        if out.alignment is not None:
            tallies["alignment"] = (out.alignment.detach() * n_tokens, n_tokens)
        return out.objective, tallies, n_tokens

    def alignment_targets(self, batch: Batch) -> torch.Tensor | None:
        """The batch's label rows (B, T, S) on the device, when the model has a supervised head."""
        if self.module.supervised_alignment is None:
            return None
        labels = self.session.data.train_alignment
        if labels is None:
            return None
        rows = target_rows([labels[i] for i in batch.indices], batch.tgt_in.shape[1], batch.src.shape[1])
        return rows.to(self.session.device)

    def validate(self, step: int, epoch: int) -> None:
        s = self.session
        result = validate(self.module, s.data, s.recipe, s.device, s.amp)
        record = s.log.write("valid", step=step, epoch=epoch, **result)
        bleu = f" bleu {record['bleu']:.2f}" if "bleu" in record else ""
        fertility = f" fertility {record['fertility']:.3f}" if "fertility" in record else ""
        s.log.say(f"step {step} valid loss {record['loss']:.3f} nll {record['nll']:.3f} ppl {record['ppl']:.2f}"
                  f"{fertility}{bleu}")


def train(recipe: TrainingRecipe, run_dir: str | Path, *, device: str = "auto", resume: bool = False,
          progress: bool = True, export: bool = True, init: str | Path | None = None,
          spm: str | Path | None = None) -> TrainResult:
    """Train `recipe` (one direction) into `run_dir`; with `resume`, continue from the newest checkpoint
    there (see `fit`). A recipe with a "symmetric" object is refused: `training.symmetric` trains it.
    `init`: start from a trained model (model dir, checkpoint or run dir; `training.initialization`),
    whose SentencePiece model becomes the run's. `spm`: a SentencePiece model to use instead of training
    one (not with `init`, which brings its own)."""
    from training.initialization import check_initial_config, load_initial_weights, read_initial_model, removed_heads

    if recipe.symmetric is not None:
        raise RecipeError([f"recipe {recipe.name!r} has 'symmetric' (two directions): train it with train-symmetric"],
                          "--recipe")
    run_dir = Path(run_dir)
    initial = None
    if spm is not None and init is not None:
        raise RecipeError(["--init brings its SentencePiece model; leave --spm out"], "--spm")
    if spm is not None and not Path(spm).is_file():
        raise RecipeError([f"{spm} is not a file"], "--spm")
    if init is not None:
        if resume and ckpt.list_checkpoints(run_dir / CHECKPOINT_DIR):
            raise RecipeError([f"{run_dir} already holds checkpoints: a resumed run continues from them, "
                               f"not from an initial model"], "--init")
        initial = read_initial_model(init, "--init")
        if (initial.source_lang, initial.target_lang) != (recipe.source_lang, recipe.target_lang):
            raise RecipeError([f"{initial.path} translates {initial.source_lang}->{initial.target_lang}, the recipe "
                               f"{recipe.source_lang}->{recipe.target_lang}"], "--init")
        if not initial.spm_path.is_file():
            raise RecipeError([f"{initial.spm_path} is missing"], "--init")
    session = start_session(recipe, run_dir, device=device, resume=resume, progress=progress,
                            spm_source=initial.spm_path if initial is not None else (Path(spm) if spm is not None else None))
    # Seed again so that the initial weights do not depend on what data preparation consumed.
    seed_everything(recipe.seed)
    config = recipe.model_config(session.data.tokenizer.vocab_size)
    model = Transformer(config)
    if initial is not None:
        check_initial_config(config.to_dict(), initial, "--init")
        removed = removed_heads(config.to_dict(), initial)
        new = load_initial_weights(model, initial, "--init", removed)
        session.log.write("init", path=str(initial.path), new_weights=new, removed_heads=removed)
        session.log.say(f"initialised from {initial.path}; new weights: {', '.join(new) if new else 'none'}"
                        + (f"; heads left out: {', '.join(removed)}" if removed else ""))
    if recipe.trainable is not None:
        frozen = freeze_except(model, recipe.trainable)
        session.log.write("frozen", parameters=frozen, trainable=recipe.trainable)
    model = model.to(session.device)
    model.train()
    try:
        step = fit(session, DirectionalObjective(model, session), resume=resume, progress=progress)
        # Every process tears its process group down together, so that no gloo peer closes its
        # sockets under another still leaving (one two-process test run in five full suites on 2
        # cores aborted in rank 1 with "terminate called without an active exception"; cause not
        # proven). Not on the error path, where a peer that failed would never reach the barrier.
        session.group.barrier()
    finally:
        session.group.close()

    model_dir = None
    if export and session.group.is_main:
        log = session.log
        model_dir, info = average_and_save(run_dir, recipe.average_last, run_dir / MODEL_DIR,
                                             fp16=recipe.export_fp16, device=str(session.device), data=session.data,
                                             recipe=recipe)
        log.write("export", step=step, **info)
        log.say(f"wrote {model_dir} (average of {len(info['averaged'])} checkpoints"
                + (f", val BLEU {info['val_bleu']:.2f})" if "val_bleu" in info else ")"))
    return TrainResult(run_dir, step, model_dir, session.log.events)


def freeze_except(model: torch.nn.Module, prefixes: list[str]) -> int:
    """Only parameters whose name starts with one of `prefixes` keep training; returns how many are frozen.
    A prefix that names no parameter is an error (a typo would otherwise train nothing)."""
    names = [name for name, _ in model.named_parameters()]
    unmatched = [p for p in prefixes if not any(name.startswith(p) for name in names)]
    if unmatched:
        raise RecipeError([f"{', '.join(repr(p) for p in unmatched)} names no parameter of the model"],
                          "trainable")
    frozen = 0
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(any(name.startswith(p) for p in prefixes))
        frozen += 0 if parameter.requires_grad else parameter.numel()
    return frozen
