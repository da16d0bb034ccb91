"""One model's losses on a batch, and the validation measure of a run (loss, nll, BLEU)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import sacrebleu
import torch

from model.transformer import ModelOutput, Transformer
from training.data import Batch, Data, collate, token_batches
from training.losses import (LossOutput, global_fertility_loss, global_fertility_term, label_smoothed_loss,
                             supervised_alignment_loss)
from training.recipe import TrainingRecipe
from training.translate import autocast_context, translate_batch


@dataclass
class DirectionLoss:
    """One model's loss on one batch."""

    xent: LossOutput                # label-smoothed cross-entropy and nll per target token
    objective: torch.Tensor         # xent.loss + global fertility weight × its term + λ × alignment (minimised)
    fertility: torch.Tensor | None  # the unweighted global fertility loss per source position, when configured
    output: ModelOutput
    alignment: torch.Tensor | None = None  # the unweighted supervised alignment loss per labelled row, when given


def direction_loss(model: Transformer, batch: Batch, n_tokens: int, *, smoothing: float, amp: bool,
                   need_attention: bool = False, forward: torch.nn.Module | None = None,
                   alignment_targets: torch.Tensor | None = None, n_source: int | None = None) -> DirectionLoss:
    """Forward `batch` (already on the model's device) and compute its losses. With a global fertility
    head, α is the configured layer's attention, fertility sums the real target rows (tgt_out not
    padding, the EOS row included) and is scored at every real source position (x and its EOS);
    the objective gets weight × `global_fertility_term` of it (the head's reduction), for which
    `n_source`, the batch's real source positions, is counted when not given.
    With `alignment_targets` (B, T, S) (`training.alignment_labels.target_rows`, on the device) and a
    supervised alignment head, λ × the supervised alignment loss is added."""
    with autocast_context(batch.src.device, amp):
        # Not `forward or model`: a torch.compile'd module has no truth value (it raises TypeError).
        out = (model if forward is None else forward)(batch.src, batch.tgt_in, need_attention=need_attention)
    xent = label_smoothed_loss(out.logits, batch.tgt_out, smoothing=smoothing, pad_id=model.config.pad_id,
                               n_tokens=n_tokens)
    objective, fertility, alignment = xent.loss, None, None
    if out.fertility_mean is not None:
        pad = model.config.pad_id
        fertility = global_fertility_loss(out.fertility_attention, batch.tgt_out.ne(pad), batch.src.ne(pad),
                                          out.fertility_mean, out.fertility_variance)
        head = model.global_fertility
        if n_source is None and head.reduction == "sum":
            n_source = batch.n_src_tokens
        term = global_fertility_term(fertility, n_source or 0, n_tokens, head.reduction)
        objective = objective + head.loss_weight * term
    if alignment_targets is not None and out.supervised_attention is not None:
        alignment = supervised_alignment_loss(out.supervised_attention, alignment_targets)
        objective = objective + model.supervised_alignment.weight * alignment
    return DirectionLoss(xent, objective, fertility, out, alignment)


def validate(model: Transformer, data: Data, recipe: TrainingRecipe, device: torch.device, amp: bool) -> dict[str, Any]:
    """Validation loss / nll per token over the whole validation set (and the global fertility loss
    per source position when the model has one), and cased sacreBLEU on the first
    `val_bleu_sentences` sentences (beam `val_beam`)."""
    model.eval()
    loss_sum = nll_sum = fertility_sum = 0.0
    tokens = source_tokens = 0
    batches = token_batches(data.valid.src_lengths(), data.valid.tgt_lengths(), recipe.max_tokens,
                            seed=recipe.seed, epoch=0, shuffle=False)
    with torch.inference_mode():
        for idx in batches:
            batch = collate([data.valid[i] for i in idx], idx)
            n, n_source = batch.n_tgt_tokens, batch.n_src_tokens
            out = direction_loss(model, batch.to(device), n, smoothing=recipe.label_smoothing, amp=amp, n_source=n_source)
            loss_sum += float(out.xent.loss) * n
            nll_sum += float(out.xent.nll) * n
            tokens += n
            if out.fertility is not None:
                fertility_sum += float(out.fertility) * n_source
                source_tokens += n_source
    result: dict[str, Any] = {"loss": loss_sum / max(tokens, 1), "nll": nll_sum / max(tokens, 1)}
    result["ppl"] = math.exp(min(result["nll"], 50.0))
    if source_tokens:
        result["fertility"] = fertility_sum / source_tokens
    if data.bleu_src:
        hyps = translate_batch(model, data.tokenizer, data.bleu_src, recipe.val_beam, batch_size=128,
                               max_length_ratio=recipe.decode_max_len_a, max_length_offset=recipe.decode_max_len_b,
                               length_penalty=recipe.decode_length_penalty,
                               length_penalty_form=recipe.decode_length_penalty_form, amp=amp)
        metric = sacrebleu.metrics.BLEU()
        result["bleu"] = round(metric.corpus_score(hyps, [data.bleu_ref]).score, 2)
        result["bleu_signature"] = str(metric.get_signature())
        result["bleu_sentences"] = len(hyps)
        result["bleu_beam"] = recipe.val_beam
    model.train()
    return result
