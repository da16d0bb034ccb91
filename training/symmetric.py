"""Bilingual symmetric training (Cohn et al. 2016, "Bilingual symmetry"): two directional models in one loop.

    loss = xent(s→t) + xent(t→s) − λ · trace bonus   [+ each model's global fertility term, if configured]

Both models see the same batches (the t→s batch is the s→t batch reversed, `training.data.reverse_batch`).
α of each model is its alignment layer's cross-attention, heads averaged (`ModelConfig.alignment_layer`,
`ModelOutput.attention`); the trace bonus and its per-batch normalisation are
`training.losses.trace_bonus`. λ is the recipe's `symmetric.lambda`. Both models share one joint
SentencePiece model and one model config; each gradient norm is clipped on its own, so with λ = 0
the two trainings are independent.

A run can start from two pretrained one-direction models (`--init-forward`, `--init-backward`: model
directories, training checkpoints, or run directories whose newest checkpoint is taken); their
SentencePiece model becomes the run's. Checkpoints hold both models (`s2t.*`, `t2s.*`); the export
writes `models/<src>-<tgt>` and `models/<tgt>-<src>`, each a servable model directory.
"""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from model.model_dir import sha256_file
from model.config import ModelConfig
from model.text.tokenizer import Tokenizer
from model.transformer import Transformer
from training import checkpoints as ckpt
from training.data import Batch, Data, collate, reverse_batch, token_batches
from training.initialization import InitialModel, read_initial_model
from training.finalize import SYMMETRIC, average_and_save_symmetric, directions
from training.loop import (CHECKPOINT_DIR, Session, TrainResult, fit, reversed_data, seed_everything,
                           start_session)
from training.losses import real_token_mask, sentence_traces, trace_bonus
from training.recipe import RecipeError, TrainingRecipe
from training.translate import autocast_context
from training.validation import direction_loss, validate

MODELS_DIR = "models"


class DirectionPair(nn.Module):
    """The two models of a symmetric run: s2t translates source -> target, t2s target -> source."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.s2t = Transformer(config)
        self.t2s = Transformer(config)


# Config keys that shape only training: a pair may continue two models trained with other dropouts.
TRAINING_ONLY_KEYS = frozenset({"dropout", "attention_dropout", "activation_dropout"})


def check_initial_models(recipe: TrainingRecipe, initial: dict[str, InitialModel]) -> Path | None:
    """Check languages, the shared SentencePiece model and the model config against the recipe; returns
    that SentencePiece model (None without initial models). `initial` maps a CLI flag to its model."""
    if not initial:
        return None
    wanted = {"--init-forward": (recipe.source_lang, recipe.target_lang),
              "--init-backward": (recipe.target_lang, recipe.source_lang)}
    for flag, model in initial.items():
        if (model.source_lang, model.target_lang) != wanted[flag]:
            raise RecipeError([f"{model.path} translates {model.source_lang}->{model.target_lang}, but this "
                               f"direction of the recipe is {wanted[flag][0]}->{wanted[flag][1]}"], flag)
        if not model.spm_path.is_file():
            raise RecipeError([f"{model.spm_path} is missing"], flag)
    spm_paths = [model.spm_path for model in initial.values()]
    if len({sha256_file(p) for p in spm_paths}) > 1:
        raise RecipeError([f"the initial models use different SentencePiece models ({spm_paths[0]}, {spm_paths[1]}); "
                           f"symmetric training needs one joint vocabulary"], "--init-backward")
    config = recipe.model_config(Tokenizer(spm_paths[0]).vocab_size).to_dict()
    for flag, model in initial.items():
        differing = sorted(k for k in set(config) | set(model.config)
                           if config.get(k) != model.config.get(k) and k not in TRAINING_ONLY_KEYS)
        if differing:
            raise RecipeError([f"{model.path} has a different model config than the recipe gives "
                               f"(differs in {', '.join(differing)})"], flag)
    return spm_paths[0]


def initial_pair(config: ModelConfig, seed: int, initial: dict[str, InitialModel]) -> DirectionPair:
    """Both models, seeded as the one-direction trainer seeds its model, then loaded from `initial`."""
    seed_everything(seed)
    pair = DirectionPair(config)
    for flag, part in (("--init-forward", pair.s2t), ("--init-backward", pair.t2s)):
        if flag in initial:
            part.load_state_dict(initial[flag].state)
    return pair


class SymmetricObjective:
    """xent(s→t) + xent(t→s) − λ · trace bonus (+ fertility terms): see the module docstring."""

    kind = SYMMETRIC

    def __init__(self, pair: DirectionPair, session: Session, backward_data: Data):
        self.module = pair
        self.config = pair.s2t.config
        self.session = session
        self.backward_data = backward_data
        self.lam = float(session.recipe.symmetric["lambda"])
        self.names = directions(session.recipe)

    def parameter_groups(self) -> dict[str, list[nn.Parameter]]:
        return {name: [p for p in model.parameters() if p.requires_grad]
                for name, model in zip(self.names, (self.module.s2t, self.module.t2s))}

    def words(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Real words of each side (not padding, not EOS): source (B, S), target (B, T)."""
        special = (self.config.pad_id, self.config.eos_id)
        return real_token_mask(batch.src, *special), real_token_mask(batch.tgt_out, *special)

    def update(self, batch: Batch) -> tuple[torch.Tensor, dict[str, tuple[torch.Tensor, float]], int]:
        s = self.session
        back = reverse_batch(batch, pad_id=self.config.pad_id, bos_id=self.config.bos_id, eos_id=self.config.eos_id)
        counts = [(batch.n_tgt_tokens, batch.n_src_tokens), (back.n_tgt_tokens, back.n_src_tokens)]
        source_words, target_words = self.words(batch)
        half_words = (int(source_words.sum()) + int(target_words.sum())) / 2  # the trace bonus' normaliser
        losses = [direction_loss(model, b.to(s.device), n_tokens, smoothing=s.recipe.label_smoothing, amp=s.amp,
                                 need_attention=True, n_source=n_source)
                  for model, b, (n_tokens, n_source) in zip((self.module.s2t, self.module.t2s), (batch, back), counts)]
        bonus = trace_bonus(losses[0].output.attention, losses[1].output.attention,
                            source_words.to(s.device), target_words.to(s.device))
        loss = losses[0].objective + losses[1].objective - self.lam * bonus
        tallies: dict[str, tuple[torch.Tensor, float]] = {"loss": (loss.detach(), 1.0)}
        for name, out, (n_tokens, n_source) in zip(self.names, losses, counts):
            tallies[f"loss.{name}"] = (out.xent.loss.detach() * n_tokens, n_tokens)
            tallies[f"nll.{name}"] = (out.xent.nll * n_tokens, n_tokens)
            if out.fertility is not None:
                tallies[f"fertility.{name}"] = (out.fertility.detach() * n_source, n_source)
        tallies["trace"] = (bonus.detach() * half_words, half_words)
        return loss, tallies, counts[0][0] + counts[1][0]

    def validation_trace(self) -> float:
        """The trace bonus over the whole validation set (Σ tr / Σ mean length, as in training)."""
        s = self.session
        was_training = self.module.training
        self.module.eval()
        traces = 0.0
        half_words = 0.0
        valid = s.data.valid
        batches = token_batches(valid.src_lengths(), valid.tgt_lengths(), s.recipe.max_tokens,
                                seed=s.recipe.seed, epoch=0, shuffle=False)
        with torch.inference_mode():
            for idx in batches:
                batch = collate([valid[i] for i in idx], idx)
                back = reverse_batch(batch, pad_id=self.config.pad_id, bos_id=self.config.bos_id,
                                     eos_id=self.config.eos_id)
                source_words, target_words = self.words(batch)
                with autocast_context(s.device, s.amp):
                    forward = self.module.s2t(batch.src.to(s.device), batch.tgt_in.to(s.device), need_attention=True)
                    backward = self.module.t2s(back.src.to(s.device), back.tgt_in.to(s.device), need_attention=True)
                traces += float(sentence_traces(forward.attention, backward.attention, source_words.to(s.device),
                                                target_words.to(s.device)).sum())
                half_words += (int(source_words.sum()) + int(target_words.sum())) / 2
        self.module.train(was_training)
        return traces / max(half_words, 1.0)

    def validate(self, step: int, epoch: int) -> None:
        s = self.session
        results = {name: validate(model, data, s.recipe, s.device, s.amp)
                   for name, model, data in zip(self.names, (self.module.s2t, self.module.t2s),
                                                (s.data, self.backward_data))}
        trace = self.validation_trace()
        s.log.write("valid", step=step, epoch=epoch, trace=trace, **results)
        parts = [f"{name} loss {r['loss']:.3f} ppl {r['ppl']:.2f}" + (f" bleu {r['bleu']:.2f}" if "bleu" in r else "")
                 for name, r in results.items()]
        s.log.say(f"step {step} valid " + "; ".join(parts) + f"; trace {trace:.3f}")


def train_symmetric(recipe: TrainingRecipe, run_dir: str | Path, *, device: str = "auto", resume: bool = False,
                    progress: bool = True, export: bool = True, init_forward: str | Path | None = None,
                    init_backward: str | Path | None = None) -> TrainResult:
    """Train both directions of a symmetric recipe into `run_dir` (see the module docstring); `resume`
    as the one-direction trainer. The initial models are only read when the run starts."""
    if recipe.symmetric is None:
        raise RecipeError(["train-symmetric needs a recipe with a 'symmetric' object, e.g. {\"lambda\": 1.0}"],
                          "--recipe")
    if recipe.model.get("supervised_alignment") is not None or recipe.trainable is not None:
        raise RecipeError(["train-symmetric does not train a supervised alignment head or a partly frozen model; "
                           "train each direction with `train` (model.supervised_alignment, trainable)"], "--recipe")
    run_dir = Path(run_dir)
    flags = {"--init-forward": init_forward, "--init-backward": init_backward}
    given = {flag: path for flag, path in flags.items() if path is not None}
    if given and resume and ckpt.list_checkpoints(run_dir / CHECKPOINT_DIR):
        raise RecipeError([f"{run_dir} already holds checkpoints: a resumed run continues from them, "
                           f"not from initial models"], next(iter(given)))
    initial = {flag: read_initial_model(path, flag) for flag, path in given.items()}
    spm_source = check_initial_models(recipe, initial)

    session = start_session(recipe, run_dir, device=device, resume=resume, progress=progress, spm_source=spm_source)
    config = recipe.model_config(session.data.tokenizer.vocab_size)
    pair = initial_pair(config, recipe.seed, initial).to(session.device)
    pair.train()
    if initial:
        session.log.write("init", **{flag.removeprefix("--init-"): str(model.path) for flag, model in initial.items()})
    backward_data = reversed_data(session.data)
    step = fit(session, SymmetricObjective(pair, session, backward_data), resume=resume, progress=progress)

    model_dirs: dict[str, Path] = {}
    if export:
        names = directions(recipe)
        model_dirs, infos = average_and_save_symmetric(
            run_dir, recipe.average_last, run_dir / MODELS_DIR, fp16=recipe.export_fp16, device=str(session.device),
            data={names[0]: session.data, names[1]: backward_data}, recipe=recipe)
        session.log.write("export", step=step, **{name: {"path": str(model_dirs[name]), **info}
                                                  for name, info in infos.items()})
        for name, path in model_dirs.items():
            bleu = infos[name].get("val_bleu")
            session.log.say(f"wrote {path} ({name}, average of {len(infos[name]['averaged'])} checkpoints"
                            + (f", val BLEU {bleu:.2f})" if bleu is not None else ")"))
    return TrainResult(run_dir, step, None, session.log.events, model_dirs)

