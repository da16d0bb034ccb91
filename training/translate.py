"""Batched translation of raw sentences with a torch Transformer: the one glue used by validation
during training and by `training.evaluate`.

Encoding, beam expansion and the IncrementalDecoder adapter are the model package's
(`model.decoding.generate`: source = pieces + [EOS], state expanded sentence-major, `decode_step`
through `TransformerBackend`); this file only sorts by length, batches, and detokenises.
"""
from __future__ import annotations

import contextlib
from typing import Sequence

import torch

from model.decoding import defaults
from model.decoding.generate import generate, source_batch
from model.decoding.options import DecodingOptions
from model.text.tokenizer import Tokenizer
from model.transformer import Transformer


def autocast_context(device: torch.device, amp: bool) -> contextlib.AbstractContextManager:
    """bf16 autocast on CUDA when asked; CPU always runs in the model's own dtype."""
    if amp and device.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


@torch.inference_mode()
def translate_batch(model: Transformer, tokenizer: Tokenizer, texts: Sequence[str], beam: int = defaults.BEAM_SIZE, *,
                    batch_size: int = 64, length_penalty: float = defaults.LENGTH_PENALTY,
                    length_penalty_form: str = defaults.LENGTH_PENALTY_FORM,
                    max_length_ratio: float = defaults.MAX_LENGTH_RATIO,
                    max_length_offset: int = defaults.MAX_LENGTH_OFFSET, amp: bool = False) -> list[str]:
    """Translate `texts` (detokenised strings in, detokenised strings out, same order).

    Sentences are sorted by length and decoded `batch_size` at a time so that padding stays small;
    beam=1 is greedy search.
    """
    if not texts:
        return []
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    options = DecodingOptions(beam_size=beam, n_best=1, length_penalty=length_penalty, length_penalty_form=length_penalty_form,
                            max_length_ratio=max_length_ratio, max_length_offset=max_length_offset)
    lengths = [len(ids) for ids in tokenizer.encode_batch(list(texts))]
    order = sorted(range(len(texts)), key=lambda i: lengths[i])
    out: list[str] = [""] * len(texts)
    try:
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            src = source_batch(tokenizer, [texts[i] for i in rows], device)  # (B, S)
            with autocast_context(device, amp):
                hypotheses = generate(model, src, options)
            for i, nbest in zip(rows, hypotheses):
                out[i] = tokenizer.decode(nbest[0].tokens)
    finally:
        model.train(was_training)
    return out
