"""One beam search for every step backend: the eager Transformer, exported graphs (ONNX Runtime,
TorchScript). A `StepBackend` encodes a source batch into the decoder's initial state (a
`DecoderState`), runs one decoding step on (tokens, state); the state expands to the beams and
reorders itself for the search (docs/design.md §3.5-3.6, model/decoder_state.py);
`generate` does everything else: beam expansion, max lengths, never generating PAD/BOS, and
following each hypothesis' attention rows (token and phrase attention, kept apart) to its end.
"""
from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Protocol

import torch

from model.decoding.beam_search import Hypothesis, beam_search
from model.config import ModelConfig
from model.decoding.finished_alignment import finished_rows, needs_forced_pass
from model.decoding.options import DecodingOptions
from model.decoder_state import DecoderState
from model.text.tokenizer import Tokenizer
from model.transformer import StepOut, Transformer


class SearchCancelled(Exception):
    """``should_stop()`` turned true between two decoding steps; the search was abandoned."""


class StepBackend(Protocol):
    """What the search needs of a model: encode, one step, reorder. The state is the backend's own."""

    config: ModelConfig
    has_attention: bool  # its steps give attention rows (needed for alignments)
    has_phrase_attention: bool  # its steps give the phrase attention when asked

    def encode(self, src: torch.Tensor) -> DecoderState:
        """src (B, S) int64 -> the decoder's initial state, one row per sentence."""
        ...

    def step(self, tokens: torch.Tensor, state: DecoderState, need_phrase_attention: bool = False) -> StepOut:
        """tokens (N,) -> `StepOut`: log-probs (N, V) float32, attention (N, S) or None, with
        need_phrase_attention the phrase attention (N, n_max, S), the new state. A backend that can give
        the supervised alignment head's row also takes need_supervised (the eager Transformer)."""
        ...


class WholeSearch(Protocol):
    """A backend that runs the whole search itself: static-state decoding (one StaticGenerator,
    model/decoding/static_decoding.py, eager steps or CUDA graphs) and CTranslate2
    (export/ct2_runner.py). `generate` hands it the batch."""

    config: ModelConfig

    def search(self, src: torch.Tensor, options: DecodingOptions,
               should_stop: Callable[[], bool] | None = None) -> list[list["Hypothesis"]]:
        """What `generate(backend, src, options, should_stop)` returns."""
        ...


class TransformerBackend:
    """The eager Transformer as a step backend."""

    has_attention = True
    has_phrase_attention = True

    def __init__(self, model: Transformer):
        self.model = model
        self.config = model.config

    def encode(self, src: torch.Tensor) -> DecoderState:
        return self.model.init_state(self.model.encode(src))

    def step(self, tokens: torch.Tensor, state: DecoderState, need_phrase_attention: bool = False,
             need_supervised: bool = False) -> StepOut:
        return self.model.decode_step(tokens, state, need_phrase_attention, need_supervised)


class SearchDecoder:
    """`model.decoding.beam_search.IncrementalDecoder` over a StepBackend: the state lives here, the search
    sees log-probs and, when asked, the attention rows to follow: the token attention (N, S), or
    with phrase attention or the supervised head {"attention": (N, S), "phrase_attention": (N, n_max, S),
    "supervised_attention": (N, S)} (those asked for)."""

    def __init__(self, backend: StepBackend, state: DecoderState, need_phrase_attention: bool = False,
                 should_stop: Callable[[], bool] | None = None, supervised: bool = False):
        self.backend = backend
        self.state = state
        self.need_phrase_attention = need_phrase_attention
        self.should_stop = should_stop
        self.supervised = supervised
        self._never = [backend.config.pad_id, backend.config.bos_id]
        # A backend whose steps give logits ranks them itself (beam_search.RankingDecoder).
        ranks = getattr(backend, "ranks_logits", False)
        self.candidates = partial(backend.candidates, never=self._never) if ranks else None
        # Its selection (the C kernels': model.decoding.selection.select in one call), where it has one.
        self.select = getattr(backend, "select", None) if ranks else None

    def step(self, tokens: torch.Tensor):
        if self.should_stop is not None and self.should_stop():
            raise SearchCancelled()
        if self.supervised:
            out = self.backend.step(tokens, self.state, self.need_phrase_attention, need_supervised=True)
        else:
            out = self.backend.step(tokens, self.state, self.need_phrase_attention)
        self.state = out.state
        log_probs = out.log_probs
        if self.candidates is None:
            # Padding and BOS are inputs only: never generate them.
            log_probs[:, self._never] = float("-inf")
        if not self.need_phrase_attention and not self.supervised:
            return log_probs, out.attention
        rows = {"attention": out.attention}
        if self.need_phrase_attention:
            rows["phrase_attention"] = out.phrase_attention
        if self.supervised:
            rows["supervised_attention"] = out.supervised_attention
        return log_probs, rows

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


def max_lengths(src: torch.Tensor, pad_id: int, options: DecodingOptions, limit: int) -> torch.Tensor:
    lengths = src.ne(pad_id).sum(dim=1).float()  # (B,)
    allowed = torch.ceil(lengths * options.max_length_ratio).long() + options.max_length_offset
    return allowed.clamp(min=1, max=limit)


@torch.inference_mode()
def generate(
    backend: StepBackend | WholeSearch | Transformer,
    src: torch.Tensor,
    options: DecodingOptions = DecodingOptions(),
    should_stop: Callable[[], bool] | None = None,
) -> list[list[Hypothesis]]:
    """The one decoding entry point: beam search over a padded source batch (B, S) (pieces + EOS);
    returns each sentence's n-best hypotheses (with their phrase / supervised rows when asked for).

    backend: a Transformer (run eagerly), any `StepBackend` (the C kernels, ONNX Runtime and
    TorchScript graphs: this module's search, model/decoding/beam_search.py), or a `WholeSearch`
    (static state with or without CUDA graphs, CTranslate2), all choosing each step by
    model/decoding/selection.py (CTranslate2 by its own C++ rules, export/ct2_runner.py).
    ``should_stop`` is asked before every decoding step (CTranslate2: before its one call, and at
    every step of a greedy search); once true the search raises ``SearchCancelled``."""
    if isinstance(backend, Transformer):
        backend = TransformerBackend(backend)
    whole = getattr(backend, "search", None)
    if whole is not None:
        return whole(src, options, should_stop)
    if options.return_attention and not backend.has_attention:
        raise ValueError("this export returns no attention, so it cannot give alignments")
    need_phrase_attention = options.return_phrase_attention
    if need_phrase_attention and not backend.has_phrase_attention:
        raise ValueError("this export returns no phrase attention, so it cannot give phrase alignments")
    config = backend.config
    forced = rows_after_search(backend, options)
    supervised = options.return_supervised_attention and not forced
    # The initial state is row-wise in the source, so expanding it equals encoding every beam's copy.
    decoder = SearchDecoder(backend, backend.encode(src).expand(options.beam_size),
                            need_phrase_attention=need_phrase_attention, should_stop=should_stop,
                            supervised=supervised)
    # Positions beyond the sinusoid table cannot be embedded; the last one is kept for EOS.
    limit = config.max_positions - 1
    found = beam_search(
        decoder,
        options,
        batch_size=src.shape[0],
        bos_id=config.bos_id,
        eos_id=config.eos_id,
        max_lengths=max_lengths(src, config.pad_id, options, limit),
        return_attention=options.return_attention or need_phrase_attention or supervised,
    )
    result = with_named_rows(found, options.return_attention, supervised) if need_phrase_attention or supervised else found
    return with_finished_rows(backend, src, result) if forced else result


def rows_after_search(backend: StepBackend, options: DecodingOptions) -> bool:
    """Whether the supervised rows asked for come from one forced pass after the search: a head
    that reads the whole target has no row at a decoding step (model/decoding/finished_alignment.py).
    Any backend over an eager Transformer (`.model`: this module's and the C-kernel one) can run it."""
    model = getattr(backend, "model", None)
    return options.return_supervised_attention and isinstance(model, Transformer) and needs_forced_pass(model)


def with_named_rows(found: list[list[Hypothesis]], tokens: bool, supervised: bool) -> list[list[Hypothesis]]:
    """Hypotheses whose rows the search recorded by name ({"attention", "phrase_attention",
    "supervised_attention"}) as Hypothesis with named fields; the token rows only when `tokens`."""
    return [
        [
            Hypothesis(
                h.tokens, h.score, h.log_prob, h.attention["attention"] if tokens else None,
                h.final_attention["attention"] if tokens else None,
                phrase_attention=h.attention.get("phrase_attention"),
                # (T + 1, S): the EOS step's row last, so that row k + 1 is the step that reads token k
                supervised_attention=torch.cat([h.attention["supervised_attention"],
                                                h.final_attention["supervised_attention"][None]]) if supervised else None,
            )
            for h in nbest
        ]
        for nbest in found
    ]


def with_finished_rows(backend: StepBackend, src: torch.Tensor,
                        found: list[list[Hypothesis]]) -> list[list[Hypothesis]]:
    """Each hypothesis with its supervised rows from one forced pass (model/decoding/finished_alignment.py)."""
    rows = finished_rows(backend.model, src, found)
    return [[Hypothesis(h.tokens, h.score, h.log_prob, h.attention, h.final_attention,
                               phrase_attention=h.phrase_attention, supervised_attention=r)
             for h, r in zip(nbest, sentence_rows)]
            for nbest, sentence_rows in zip(found, rows)]


def generate_ids(backend: StepBackend | WholeSearch | Transformer, sources: list[list[int]], options: DecodingOptions,
                 should_stop: Callable[[], bool] | None = None) -> list[list[Hypothesis]]:
    """`generate` on piece ids without EOS; the model reads pieces + EOS, right-padded."""
    config = backend.config
    return generate(backend, pad_sources([ids + [config.eos_id] for ids in sources], config.pad_id), options, should_stop)


def source_ids(src: torch.Tensor, pad_id: int, eos_id: int) -> list[list[int]]:
    """A padded batch (B, S) of pieces + EOS back to piece ids without EOS (generate_ids' input)."""
    rows = src.tolist()
    out = []
    for row in rows:
        ids = [i for i in row if i != pad_id]
        out.append(ids[:-1] if ids and ids[-1] == eos_id else ids)
    return out
