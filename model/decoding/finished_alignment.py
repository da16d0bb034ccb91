"""The supervised alignment rows of finished hypotheses, by one forced pass.

A supervised head that reads the whole target (`SupervisedAlignment.needs_finished_target`: a
non-causal self-attention over the target, or the distance from the diagonal, which needs the
target's length) has no row at a decoding step. Its rows come once the search is over: every
hypothesis is forced through the model, ``model(src, [BOS] + tokens)``, and row k + 1 of the head's
output is the one that reads token k, exactly as the step-wise head's rows are laid out
(`model.decoding.beam_search.Hypothesis.supervised_attention`). Costs one batched pass of all n-best
hypotheses through the encoder and the decoder up to the head's layer (results/alignment.md);
the layers above it and the output projection are skipped, since nothing reads them.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from model.decoding.beam_search import Hypothesis
from model.decoder_state import Memory
from model.transformer import Transformer


def layer_features(model: Transformer, src: torch.Tensor, tgt_in: torch.Tensor) -> tuple[Memory, torch.Tensor]:
    """src (B, S), tgt_in (B, T) -> the encoder's memory and the output of the supervised head's
    decoder layer (B, T, D), as `Transformer.forward` computes them."""
    memory = model.encode(src)
    x = model.target_embedding(tgt_in)  # (B, T, D)
    for layer in model.decoder_layers[: model.supervised_alignment.layer_index + 1]:
        x = layer(x, memory.states, memory.pad_mask, phrase_representations=memory.phrase_representations,
                  phrase_chunks=memory.phrase_chunks).out
    return memory, x


def added_head_rows(model: Transformer, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
    """The added head's rows (B, T, S) of `Transformer.forward(src, tgt_in).supervised_attention`,
    without the layers above the head."""
    memory, x = layer_features(model, src, tgt_in)
    head = model.supervised_alignment
    return head.attend(x, head.keys(memory.states), memory.pad_mask, tgt_in.eq(model.config.pad_id))


def needs_forced_pass(model: Transformer) -> bool:
    head = model.supervised_alignment
    return head is not None and head.needs_finished_target


@torch.inference_mode()
def finished_rows(model: Transformer, src: torch.Tensor, found: Sequence[Sequence[Hypothesis]]) -> list[list[torch.Tensor]]:
    """src (B, S) the searched source batch, found[b] sentence b's hypotheses -> for each hypothesis
    its head rows (len(tokens) + 1, S) float32: row 0 reads BOS, row k + 1 reads token k."""
    c = model.config
    owners = [(b, h) for b, nbest in enumerate(found) for h in nbest]
    if not owners:
        return [[] for _ in found]
    width = max(len(h.tokens) for _, h in owners) + 1
    tgt_in = torch.full((len(owners), width), c.pad_id, dtype=torch.long, device=src.device)  # (N, T)
    for n, (_, h) in enumerate(owners):
        tgt_in[n, : len(h.tokens) + 1] = torch.tensor([c.bos_id, *h.tokens], dtype=torch.long)
    rows = added_head_rows(model, src[[b for b, _ in owners]], tgt_in).float()  # (N, T, S)
    out: list[list[torch.Tensor]] = [[] for _ in found]
    for n, (b, h) in enumerate(owners):
        out[b].append(rows[n, : len(h.tokens) + 1])
    return out
