"""An exported CTranslate2 model: its own C++ beam search, with our options mapped onto it.

The mapping keeps the two searches equal where it matters:
- score: CTranslate2 finalises a hypothesis with `score = log_prob / len ** length_penalty`
  where len counts EOS (its decoding keeps EOS in the hypothesis until after scoring), which is
  exactly our formula for length_penalty_form "power" (CTranslate2 has no other: "gnmt" is
  refused with an error, never approximated); both search the 2K best candidates, admit EOS only among the first K,
  start with beam 0 alone, and stop a sentence at K finished hypotheses (patience 1).
- length: one `translate_batch` per batch, as CTranslate2's users call it, so one limit for the
  whole batch: `max_decoding_length = limit + 1` steps for the batch's longest per-sentence limit
  (ours: `ceil(ratio * (pieces + 1)) + offset` tokens before EOS, per sentence). A sentence whose
  own limit is shorter may therefore run on past it where ours would have forced EOS, and at the
  batch's last step CTranslate2 keeps the best candidates whatever they are, where ours forces EOS:
  hypotheses that reach their own limit may differ. `benchmarks/ct2_batch_limit.py` measures
  how often (the share of identical hypotheses with and without the per-sentence limits).
- `min_decoding_length = 0` (ours may end at once) and PAD and BOS suppressed (ours never
  generates them). CTranslate2 suppresses before its softmax, ours masks after it, so scores
  differ by log(1 - P(PAD) - P(BOS)) per token: nothing for a trained model, which never
  predicts them (bundled en-de: max |score difference| 3.9e-4 over 300 sentences).
- the source is not truncated (the runtime rejects over-long texts itself); n-best lists can
  differ below the top: when more than K hypotheses end at one step CTranslate2 keeps them all
  and sorts, ours keeps the first K by log-prob.
- phrase attention: CTranslate2 serves only the vanilla Transformer, whose phrase table is its
  token attention as 1-grams (`DecoderLayer.step`), so it is built from the attention rows:
  (T, 1, S) over the source pieces (CTranslate2 returns no EOS or padding columns).
"""
from __future__ import annotations

import math
from collections.abc import Callable
import torch

from model.decoding.beam_search import Hypothesis
from model.decoding.length_penalty import ct2_problem
from model.decoding.generate import SearchCancelled, source_ids
from model.decoding.options import DecodingOptions
from model.text.tokenizer import Tokenizer
from export.exported_dir import ExportedDir
from export.ct2_target import vocabulary


def ct2_device(device: str) -> str:
    import ctranslate2

    has_cuda = ctranslate2.get_cuda_device_count() > 0
    if device == "cuda" and not has_cuda:
        raise RuntimeError("device 'cuda' was asked for but ctranslate2 sees no CUDA device")
    return "cuda" if device in ("cuda", "auto") and has_cuda else "cpu"


class Ct2Runner:
    has_attention = True
    has_phrase_attention = True  # the token attention as 1-grams (see the module doc)
    is_phrasal = False

    def __init__(self, exported: ExportedDir, device: str = "cpu", threads: int = 0):
        import ctranslate2

        self.exported = exported
        self.config = exported.config
        self.translator = ctranslate2.Translator(str(exported.path), device=ct2_device(device), intra_threads=threads)
        self.pieces = vocabulary(Tokenizer(exported.tokenizer_path))
        self.ids = {piece: i for i, piece in enumerate(self.pieces)}
        self._suppress = [[self.pieces[self.config.pad_id]], [self.pieces[self.config.bos_id]]]

    def limit(self, n_pieces: int, options: DecodingOptions) -> int:
        """Our max hypothesis length (EOS excluded) for a source of n_pieces pieces + EOS."""
        allowed = math.ceil((n_pieces + 1) * options.max_length_ratio) + options.max_length_offset
        return max(1, min(allowed, self.config.max_positions - 1))

    def _first_attention_rows(self, batch: list[list[str]]) -> list[torch.Tensor]:
        """Each source's attention at the first step (S,), the same for all its hypotheses.

        Works around CTranslate2 (4.8 on CPU): batched beam search returns the first step's
        attention row of another sentence in the batch (it decodes that step before expanding the
        beams and gathers the row with the expanded indices); later rows, and single sentences,
        are right. One greedy step gives the right row: the step reads only BOS and the source.
        """
        outputs = self.translator.translate_batch(
            batch, beam_size=1, max_decoding_length=1, min_decoding_length=0, max_input_length=0,
            return_end_token=True, return_attention=True,
        )
        return [torch.tensor(output.attention[0][0], dtype=torch.float32) for output in outputs]

    def search(self, src: torch.Tensor, options: DecodingOptions,
               should_stop: Callable[[], bool] | None = None) -> list[list[Hypothesis]]:
        """`model.decoding.generate.generate(self, src, ...)`: a padded batch of pieces + EOS."""
        return self.generate(source_ids(src, self.config.pad_id, self.config.eos_id), options, should_stop)

    def generate(self, sources: list[list[int]], options: DecodingOptions,
                 should_stop: Callable[[], bool] | None = None) -> list[list[Hypothesis]]:
        """Sources are piece ids without EOS (CTranslate2 adds it); n-best hypotheses per source.
        should_stop is asked before the call, and by a greedy search (beam 1) at every step, where
        CTranslate2 offers a callback; a beam search runs to its end once called."""
        why = ct2_problem(options.length_penalty_form)
        if why is not None:  # never rank with the other formula
            raise ValueError(why)
        with_attention = options.return_attention or options.return_phrase_attention
        if should_stop is not None and should_stop():
            raise SearchCancelled()
        if not sources:
            return []
        batch = [[self.pieces[i] for i in ids] for ids in sources]
        def stop(_step) -> bool:  # True stops CTranslate2's batch
            return bool(should_stop())

        stop_greedy = stop if should_stop is not None and options.beam_size == 1 else None
        outputs = self.translator.translate_batch(
            batch,
            beam_size=options.beam_size,
            patience=1,
            num_hypotheses=options.n_best,
            length_penalty=options.length_penalty,
            max_decoding_length=max(self.limit(len(ids), options) for ids in sources) + 1,
            min_decoding_length=0,
            max_input_length=0,
            suppress_sequences=self._suppress,
            return_scores=True,
            return_attention=with_attention,
            callback=stop_greedy,
        )
        if stop_greedy is not None and should_stop():
            raise SearchCancelled()  # the outputs may be cut short
        first_rows = self._first_attention_rows(batch) if with_attention and len(batch) > 1 else None
        return [self._hypotheses(output, len(ids), options, first_rows[slot] if first_rows else None)
                for slot, (ids, output) in enumerate(zip(sources, outputs))]

    def _hypotheses(self, output, n_source: int, options: DecodingOptions,
                    first_row: torch.Tensor | None) -> list[Hypothesis]:
        """One source's n-best from CTranslate2's result, rows (T, S) over its n_source pieces."""
        phrases = options.return_phrase_attention
        with_attention = options.return_attention or phrases
        hypotheses = []
        for h, tokens in enumerate(output.hypotheses):
            score = float(output.scores[h])
            attention = None
            if with_attention:
                rows = torch.tensor(output.attention[h], dtype=torch.float32)
                attention = rows.reshape(len(tokens), n_source)  # (T, S), also when T = 0
                if first_row is not None and len(attention):
                    attention[0] = first_row
            log_prob = score * (len(tokens) + 1) ** options.length_penalty
            ids = [self.ids[t] for t in tokens]
            if phrases:
                kept = attention if options.return_attention else None
                hypotheses.append(Hypothesis(ids, score, log_prob, kept, phrase_attention=attention.unsqueeze(1)))  # (T, 1, S)
            else:
                hypotheses.append(Hypothesis(ids, score, log_prob, attention))
        return hypotheses
