"""Glue between the Transformer and the model-agnostic beam search."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from model.beam_search import Hypothesis, beam_search
from model.state import DecoderState
from model.tokenizer import Tokenizer
from model.transformer import Transformer


@dataclass(frozen=True)
class SearchOptions:
    beam_size: int = 5
    n_best: int = 1
    # score = log P / len**length_penalty (see model.beam_search)
    length_penalty: float = 1.0
    # The most tokens a hypothesis may have, EOS not counted: ceil(ratio * source tokens) + offset.
    max_length_ratio: float = 2.0
    max_length_offset: int = 10
    return_attention: bool = False
    # Also return each hypothesis' phrase attention (see PhrasalHypothesis).
    return_phrase_attention: bool = False
    # Also return each hypothesis' supervised alignment head rows (the model must have the head).
    return_supervised_attention: bool = False


@dataclass
class PhrasalHypothesis(Hypothesis):
    """A hypothesis with its phrase attention (len(tokens), n_max, S): [t, n-1, j] = weight of the
    source n-gram starting at j with length n (`model.phrases.phrase_links` reads it)."""

    phrase_attention: torch.Tensor | None = None
    # (len(tokens) + 1, S): the supervised alignment head's row of every step, the EOS step last, so
    # that row k + 1 is the step that reads token k (model/supervised_alignment.py).
    supervised_attention: torch.Tensor | None = None


class TransformerStepDecoder:
    """`IncrementalDecoder` over a torch Transformer: the state lives here, the search sees log-probs.

    With phrases=True every attention row is [token attention (S) | phrase attention (n_max·S)],
    so that the search carries both per hypothesis without knowing either; with supervised=True
    the supervised head's row (S) comes last.
    """

    def __init__(self, model: Transformer, state: DecoderState, phrases: bool = False, supervised: bool = False):
        self.model = model
        self.state = state
        self.phrases = phrases
        self.supervised = supervised
        self._never = [model.config.pad_id, model.config.bos_id]

    def step(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.supervised:
            out = self.model.decode_step_with_alignment(tokens, None, self.state, need_phrases=self.phrases)
            log_probs, self.state = out.log_probs, out.state
            parts = [out.attention, out.phrase_attention.flatten(1)] if self.phrases else [out.attention]
            attention = torch.cat([*parts, out.supervised_attention], dim=1)  # (N, S [+ n_max·S] + S)
        elif self.phrases:
            out = self.model.decode_step_with_phrases(tokens, None, self.state)
            log_probs, self.state = out.log_probs, out.state
            attention = torch.cat([out.attention, out.phrase_attention.flatten(1)], dim=1)  # (N, S + n_max·S)
        else:
            log_probs, attention, self.state = self.model.decode_step(tokens, None, self.state)
        # Padding and BOS are inputs only: never generate them.
        log_probs[:, self._never] = float("-inf")
        return log_probs, attention

    def reorder(self, index: torch.Tensor) -> None:
        self.state = self.state.reorder(index)


def source_batch(tokenizer: Tokenizer, texts: list[str], device: torch.device | str = "cpu") -> torch.Tensor:
    """(B, S) ids: each text's pieces followed by EOS, right-padded."""
    return pad_sources([ids + [tokenizer.eos_id] for ids in tokenizer.encode_batch(texts)], tokenizer.pad_id, device)


def pad_sources(sequences: list[list[int]], pad_id: int, device: torch.device | str = "cpu") -> torch.Tensor:
    width = max((len(s) for s in sequences), default=1)
    batch = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    for row, ids in enumerate(sequences):
        batch[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return batch.to(device)


def max_lengths(src: torch.Tensor, pad_id: int, options: SearchOptions, limit: int) -> torch.Tensor:
    lengths = src.ne(pad_id).sum(dim=1).float()  # (B,)
    allowed = torch.ceil(lengths * options.max_length_ratio).long() + options.max_length_offset
    return allowed.clamp(min=1, max=limit)


@torch.inference_mode()
def generate(model: Transformer, src: torch.Tensor, options: SearchOptions = SearchOptions()) -> list[list[Hypothesis]]:
    """Beam search over a padded source batch (B, S); returns each sentence's n-best hypotheses
    (PhrasalHypothesis when options.return_phrase_attention)."""
    k = options.beam_size
    memory = model.encode(src)
    rows = torch.arange(src.shape[0], device=src.device).repeat_interleave(k)  # (B*K,) sentence-major
    phrases = options.return_phrase_attention
    supervised = options.return_supervised_attention
    decoder = TransformerStepDecoder(model, model.init_state(memory.reorder(rows)), phrases=phrases,
                                     supervised=supervised)
    # Positions beyond the sinusoid table cannot be embedded; the last one is kept for EOS.
    limit = model.config.max_positions - 1
    found = beam_search(
        decoder,
        batch_size=src.shape[0],
        beam_size=k,
        bos_id=model.config.bos_id,
        eos_id=model.config.eos_id,
        max_lengths=max_lengths(src, model.config.pad_id, options, limit),
        n_best=options.n_best,
        length_penalty=options.length_penalty,
        return_attention=options.return_attention or phrases or supervised,
    )
    if not phrases and not supervised:
        return found
    return [[_split_rows(h, src.shape[1], options.return_attention, supervised) for h in nbest] for nbest in found]


def _split_rows(hypothesis: Hypothesis, source_len: int, keep_tokens: bool, supervised: bool = False) -> PhrasalHypothesis:
    rows = hypothesis.attention  # (T, S [+ n_max·S] [+ S])
    last = hypothesis.final_attention  # (S [+ n_max·S] [+ S],)
    width = rows.shape[1] - (source_len if supervised else 0)
    n_max = width // source_len - 1
    phrase_attention = rows[:, source_len:width].reshape(rows.shape[0], n_max, source_len) if n_max else None
    supervised_rows = torch.cat([rows[:, width:], last[None, width:]]) if supervised else None  # (T + 1, S)
    return PhrasalHypothesis(
        hypothesis.tokens, hypothesis.score, hypothesis.log_prob,
        rows[:, :source_len] if keep_tokens else None,
        last[:source_len] if keep_tokens else None,
        phrase_attention=phrase_attention, supervised_attention=supervised_rows,
    )
