"""Static-state decoding: the beam search of `model.decoding.generate.generate` over fixed shapes and
preallocated state, so that its steps can be captured as CUDA graphs (model/decoding/cuda_graph_step.py)
and need no host synchronisation between the few `all_done` checks.

- The batch is padded up to a bucket (model/decoding/static_buckets.py): padding sentences are a lone
  EOS that never starts searching; source columns are padding, masked as any padding is.
- The decoder state is allocated once per bucket (`StaticDecoder`) and written in place. The
  caches that grow by one row per step (self-attention keys and values, found by comparing the
  state before and after the first step: their dim 2 grows by one) are buffers of
  `bucket.target` rows along dim 2, of which step t reads the first t (a view) and writes t + 1.
- The beam reorder is a gather of each per-beam tensor of the step's new state into its buffer
  (per-sentence tensors stay: within a bucket no sentence leaves, `model.decoding.static_search` says why).
- Every `check_every` steps (the only host reads of the loop) the search looks at which sentences
  are still active; once they fit a smaller batch bucket, their rows of every buffer and of the
  search records are gathered into that bucket's decoder, which carries on (`_shrink`): finished
  sentences stop costing steps, as they do in the eager search, which drops them at every step.
- The step itself is the eager one (`StepBackend.step`), so every attention kind, phrasal window
  and bias state is served by its own public step contract, and step t computes what the eager
  search computes at step t. Because a step reads a t-row prefix of its caches, step t has its
  own shapes: one CUDA graph per (bucket, t), all sharing one memory pool.

Step 0 runs eagerly on the freshly encoded state (it shows which tensors grow); steps 1..
run `StaticDecoder.run_step(t)`, a function of the buffers only, which is what gets captured.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

import torch

from model.decoding.beam_search import Hypothesis, validate_batch
from model.decoding.generate import (SearchCancelled, StepBackend, TransformerBackend,
                                    max_lengths, rows_after_search, with_finished_rows, with_named_rows)
from model.decoding.options import DecodingOptions
from model.decoder_state import DecoderState
from model.decoding.static_buckets import BATCH_SIZES, SOURCE_WIDTHS, Bucket, choose_bucket, round_up
from model.decoding.static_search import StaticSearch
from model.transformer import StepOut, Transformer

# How many steps run between two reads of the search's all_done flag (the only host syncs).
FINISHED_CHECK_EVERY = 4


def pad_to_bucket(src: torch.Tensor, bucket: Bucket, pad_id: int, eos_id: int) -> torch.Tensor:
    """(B, S) -> (bucket.batch, bucket.source): padding columns, then padding sentences (a lone EOS)."""
    b, s = src.shape
    out = torch.full((bucket.batch, bucket.source), pad_id, dtype=src.dtype, device=src.device)  # (Bb, Sb)
    out[:b, :s] = src
    out[b:, 0] = eos_id
    return out


class StaticStateUnsupported(ValueError):
    """A model whose decoder state static decoding cannot preallocate; the eager search serves it."""


def grown(before: torch.Tensor, after: torch.Tensor) -> bool:
    """Whether a state tensor is a cache that a step extended by one row along dim 2."""
    if before.shape == after.shape:
        return False
    if before.dim() < 3 or after.shape[2] != before.shape[2] + 1 or before.shape[:2] + before.shape[3:] != after.shape[:2] + after.shape[3:]:
        raise StaticStateUnsupported(f"a decoder state tensor changed shape {tuple(before.shape)} -> {tuple(after.shape)}; "
                         "static decoding knows fixed tensors and caches that grow by one row along dim 2")
    return True


class StaticDecoder:
    """The decoder state of one bucket, preallocated, and the step that runs on it.

    `allocate(state0, out0)` makes the buffers on the bucket's first batch; `commit(0, ...)`
    writes a batch's eager step 0 into them; `run_step(t)` then runs step t >= 1 on the buffers:
    tokens from `tokens`, log-probs and attention rows into the search, the new state reordered
    by the surviving beams into the buffers.
    """

    def __init__(self, backend: StepBackend, bucket: Bucket, options: DecodingOptions):
        self.backend = backend
        self.bucket = bucket
        self.need_phrase_attention = options.return_phrase_attention
        self.supervised = options.return_supervised_attention
        self.never: torch.Tensor | None = None  # (2,) PAD and BOS, on the device (no host data in a step)
        self.buffers: dict[str, torch.Tensor] | None = None
        self.growing: frozenset[str] = frozenset()
        self.sentence: frozenset[str] = frozenset()
        self.beam_size = options.beam_size
        self.tokens: torch.Tensor | None = None  # (N,) the tokens step t reads
        self.search: StaticSearch | None = None

    # -- the step ------------------------------------------------------------------------
    def step(self, tokens: torch.Tensor, state: DecoderState) -> tuple[torch.Tensor, dict[str, torch.Tensor], StepOut]:
        """One eager step, as `model.decoding.generate.SearchDecoder` takes it: log-probs with PAD and BOS
        never generated, and the attention rows by name."""
        if self.supervised:
            out = self.backend.step(tokens, state, self.need_phrase_attention, need_supervised=True)
        else:
            out = self.backend.step(tokens, state, self.need_phrase_attention)
        log_probs = out.log_probs
        if self.never is None:
            config = self.backend.config
            self.never = torch.tensor([config.pad_id, config.bos_id], device=log_probs.device)
        log_probs.index_fill_(1, self.never, float("-inf"))
        rows = {}
        if out.attention is not None:
            rows["attention"] = out.attention
        if self.need_phrase_attention:
            rows["phrase_attention"] = out.phrase_attention
        if self.supervised:
            rows["supervised_attention"] = out.supervised_attention
        return log_probs, rows, out

    def allocate(self, state0: DecoderState, out0: StepOut) -> None:
        """On the bucket's first batch: its buffers, shaped by the state before and after step 0."""
        if self.buffers is not None:
            return
        after = out0.state.tensors
        self.growing = frozenset(name for name, t in state0.tensors.items() if grown(t, after[name]))
        self.sentence = out0.state.sentence
        self.buffers = {}
        for name, t in after.items():
            if name in self.growing:
                shape = (*t.shape[:2], self.bucket.target, *t.shape[3:])  # (N, H, T_bucket, …)
                self.buffers[name] = torch.zeros(shape, dtype=t.dtype, device=t.device)
            else:
                self.buffers[name] = torch.empty_like(t, memory_format=torch.contiguous_format)

    def take(self, source: "StaticDecoder", sentences: list[int], steps_done: int) -> None:
        """Carry on `source`'s sentences at these positions in this (smaller) bucket, after
        `steps_done` steps: their rows of every buffer and of the search; the rest is padding."""
        if self.buffers is None:
            self.growing, self.sentence = source.growing, source.sentence
            self.buffers = {name: torch.zeros((self.bucket.batch * self.beam_size, *buf.shape[1:]), dtype=buf.dtype,
                                              device=buf.device) for name, buf in source.buffers.items()}
            self.tokens = torch.empty(self.bucket.batch * self.beam_size, dtype=torch.long, device=source.tokens.device)
            self.never = source.never
        padded = sentences + [sentences[0]] * (self.bucket.batch - len(sentences))
        picked = torch.tensor(padded, device=source.tokens.device)  # (B',)
        rows = (picked.unsqueeze(1) * self.beam_size + torch.arange(self.beam_size, device=picked.device)).flatten()  # (B'·K,)
        for name, buf in self.buffers.items():
            part = (lambda t: t[:, :, :steps_done]) if name in self.growing else (lambda t: t)
            part(buf).copy_(part(source.buffers[name]).index_select(0, rows))
        self.tokens.copy_(source.tokens.index_select(0, rows))
        self.search.take(source.search, picked, len(sentences), steps_done)

    def run_step(self, t: int) -> None:
        """Step t >= 1 on the buffers only (what a CUDA graph captures): no host reads."""
        view = {name: buf[:, :, :t] if name in self.growing else buf for name, buf in self.buffers.items()}
        log_probs, rows, out = self.step(self.tokens, DecoderState(view, self.sentence, self.beam_size))
        self.commit(t, log_probs, rows, out.state.tensors)

    def commit(self, t: int, log_probs: torch.Tensor, rows: dict[str, torch.Tensor], new_state: dict[str, torch.Tensor]) -> None:
        """The search's step t, then the step's new state written into the buffers in the order of
        the surviving beams: one gather per per-beam tensor (a cache's t + 1 rows, which the step's
        new cache holds whole), straight into its buffer."""
        next_tokens, parent_rows = self.search.advance(t, log_probs, rows)
        self.tokens.copy_(next_tokens)
        for name, new in new_state.items():
            buf = self.buffers[name]
            if name in self.sentence:
                # Passed through by every step after the first; beams never change sentence.
                if new is not buf:
                    buf.copy_(new)
                continue
            target = buf[:, :, : t + 1] if name in self.growing else buf
            if target.is_contiguous():
                torch.index_select(new, 0, parent_rows, out=target)
            else:  # a cache's prefix: strided by the bucket's rows
                target.copy_(new.index_select(0, parent_rows))


StaticStepRunner = Callable[[StaticDecoder, int], None]


def eager_runner(decoder: StaticDecoder, t: int) -> None:
    decoder.run_step(t)


class StaticGenerator:
    """The search over static state: one `StaticDecoder` per bucket, kept across calls.

    runner runs a decoder's step t (`eager_runner`, or a CUDA-graph runner from
    model/decoding/cuda_graph_step.py); check_every: steps between two reads of the all_done flag.
    """

    def __init__(self, backend: StepBackend | Transformer, runner: StaticStepRunner = eager_runner,
                 check_every: int = FINISHED_CHECK_EVERY, **bucket_ladders):
        self.backend = TransformerBackend(backend) if isinstance(backend, Transformer) else backend
        self.runner = runner
        self.check_every = check_every
        self.bucket_ladders = bucket_ladders
        self.decoders: dict[tuple, StaticDecoder] = {}
        # A bucket's buffers serve one batch at a time: callers on several threads take turns.
        self.lock = threading.Lock()

    def search(self, src: torch.Tensor, options: DecodingOptions = DecodingOptions(),
               should_stop: Callable[[], bool] | None = None) -> list[list[Hypothesis]]:
        """What `model.decoding.generate.generate(self.backend, src, options, should_stop)` returns,
        computed on a bucket's static state (`generate(self, ...)` calls this: a WholeSearch)."""
        forced = rows_after_search(self.backend, options)
        if forced:
            options = options.without_step_supervised_rows()
        with self.lock:
            found = self._generate(src, options, should_stop)
        return with_finished_rows(self.backend, src, found) if forced else found

    @torch.inference_mode()
    def _generate(self, src: torch.Tensor, options: DecodingOptions,
                  should_stop: Callable[[], bool] | None) -> list[list[Hypothesis]]:
        backend, config = self.backend, self.backend.config
        if options.return_attention and not backend.has_attention:
            raise ValueError("this export returns no attention, so it cannot give alignments")
        if options.return_phrase_attention and not backend.has_phrase_attention:
            raise ValueError("this export returns no phrase attention, so it cannot give phrase alignments")
        batch, width = src.shape
        limits = max_lengths(src, config.pad_id, options, config.max_positions - 1)  # (B,)
        validate_batch(batch, limits)  # the eager search's errors
        if batch == 0:
            return []
        longest = int(limits.max())
        bucket = choose_bucket(batch, width, longest, position_limit=config.max_positions, **self.bucket_ladders)
        padded = pad_to_bucket(src, bucket, config.pad_id, config.eos_id)  # (Bb, Sb)
        decoder = self._decoder(bucket, options)

        if should_stop is not None and should_stop():
            raise SearchCancelled()
        state0 = backend.encode(padded).expand(options.beam_size)
        rows_n = bucket.batch * options.beam_size
        tokens = torch.full((rows_n,), config.bos_id, dtype=torch.long, device=padded.device)
        log_probs, rows, out0 = decoder.step(tokens, state0)
        decoder.allocate(state0, out0)
        if decoder.tokens is None:
            decoder.tokens = torch.empty_like(tokens)
        limits_b = torch.zeros(bucket.batch, dtype=torch.long, device=padded.device)
        limits_b[:batch] = limits.to(padded.device)
        live = torch.arange(bucket.batch, device=padded.device) < batch  # (Bb,)
        recorded = self._recorded_rows(options, rows)
        if decoder.search is None:
            shapes = {name: tuple(rows[name].shape[1:]) for name in recorded}  # (S,) or (n_max, S)
            decoder.search = StaticSearch(bucket.batch, options.beam_size, bucket.target, log_probs.shape[1], config.eos_id,
                                          limits_b, live, shapes)
        else:
            decoder.search.reset(limits_b, live)
        decoder.commit(0, log_probs, rows, out0.state.tensors)
        # Where each sentence's search is: a search moves to a smaller bucket once its active
        # sentences fit one, so that finished sentences stop costing steps.
        where = [(decoder.search, b) for b in range(batch)]
        ids = list(range(batch))  # the sentence at each position of the current bucket
        for t in range(1, longest + 1):
            if t % self.check_every == 0:
                active = [p for p, a in enumerate(decoder.search.active.tolist()) if a]
                if not active:
                    break
                decoder = self._shrink(decoder, active, t, options, where, ids)
            if should_stop is not None and should_stop():
                raise SearchCancelled()
            self.runner(decoder, t)
        return self._results(where, width, options)

    def warm(self, batch_sizes: Sequence[int], source_widths: Sequence[int], options: DecodingOptions,
             device: torch.device) -> int:
        """Decode made-up batches so that the buckets real traffic lands in have their buffers, and
        on CUDA their step graphs, before the first request: a bucket's first batch otherwise pays a
        capture per step (the suspected cause of the p99 of 2-3x CTranslate2's with 16-64 clients
        on an H100, results/load_cuda.md; to be measured). A bucket is (batch, source width, target
        steps), and the target steps follow the longest source's own length, not its width: so for
        every batch size and width, one batch per target rung that the lengths of that width reach
        (`warm_lengths`). The made-up sources are ordinary tokens, so their searches end where a
        real one would, and the steps after that are captured when a batch first reaches them.
        Returns the buckets held."""
        config = self.backend.config
        first = max(config.pad_id, config.bos_id, config.eos_id) + 1
        for width in source_widths:
            for length in self.warm_lengths(width, options):
                for batch in batch_sizes:
                    body = first + (torch.arange(batch * (length - 1)) * 7919) % (config.vocab_size - first)
                    src = torch.full((batch, width), config.pad_id, dtype=torch.long)
                    src[:, : length - 1] = body.view(batch, length - 1)
                    src[:, length - 1] = config.eos_id
                    self.search(src.to(device), options)
        return len(self.decoders)

    def warm_lengths(self, width: int, options: DecodingOptions) -> list[int]:
        """Source lengths (EOS included) that fill `width`'s rung of the source ladder, the longest
        of each target rung they reach under `options`' length limits (so that its search runs, and
        captures, the most steps), shortest first."""
        config = self.backend.config
        widths = self.bucket_ladders.get("source_widths", SOURCE_WIDTHS)
        rung = round_up(width, widths)
        lower = max([w for w in widths if w < rung], default=1)  # lengths above it share this rung
        longest: dict[int, int] = {}
        for length in range(lower + 1, min(rung, config.max_positions) + 1):
            src = torch.full((1, length), config.pad_id + 1, dtype=torch.long)  # any token but padding
            limit = int(max_lengths(src, config.pad_id, options, config.max_positions - 1)[0])
            target = choose_bucket(1, length, limit, position_limit=config.max_positions, **self.bucket_ladders).target
            longest[target] = length
        return sorted(longest.values())

    def _decoder(self, bucket: Bucket, options: DecodingOptions) -> StaticDecoder:
        key = (bucket, options.beam_size, options.return_attention, options.return_phrase_attention,
               options.return_supervised_attention)
        if key not in self.decoders:
            self.decoders[key] = StaticDecoder(self.backend, bucket, options)
        return self.decoders[key]

    def _shrink(self, decoder: StaticDecoder, active: list[int], steps_done: int, options: DecodingOptions,
                where: list, ids: list[int]) -> StaticDecoder:
        """The decoder of the smallest bucket that holds the active positions (`decoder` itself
        when that is its own), carrying them on; `where` and `ids` follow them."""
        ladder = self.bucket_ladders.get("batch_sizes", BATCH_SIZES)
        smaller = round_up(len(active), ladder)
        if smaller >= decoder.bucket.batch:
            return decoder
        target = self._decoder(replace(decoder.bucket, batch=smaller), options)
        if target.search is None:
            source = decoder.search
            target.search = StaticSearch(smaller, source.K, source.steps, source.V, source.eos_id,
                                         source.max_lengths[:smaller], source.active[:smaller],
                                         {name: tuple(r.shape[2:]) for name, r in source.rows.items()})
        target.take(decoder, active, steps_done)
        for position, p in enumerate(active):
            where[ids[p]] = (target.search, position)
        ids[:] = [ids[p] for p in active]
        return target

    @staticmethod
    def _recorded_rows(options: DecodingOptions, rows: dict[str, torch.Tensor]) -> list[str]:
        names = []
        if options.return_attention or options.return_phrase_attention or options.return_supervised_attention:
            names.append("attention")
        if options.return_phrase_attention:
            names.append("phrase_attention")
        if options.return_supervised_attention:
            names.append("supervised_attention")
        return [name for name in names if name in rows]

    @staticmethod
    def _results(where: list[tuple[StaticSearch, int]], width: int, options: DecodingOptions) -> list[list[Hypothesis]]:
        """The hypotheses as `generate` gives them, each sentence's from the search it ended in;
        attention cut back to the batch's own width."""
        source = (slice(0, width),)
        cut = {"attention": source, "phrase_attention": (slice(None), *source), "supervised_attention": source}
        found: list = [None] * len(where)
        for search in {id(s): s for s, _ in where}.values():
            mine = [b for b, (s, _) in enumerate(where) if s is search]
            for b, nbest in zip(mine, search.hypotheses([where[b][1] for b in mine], options.n_best,
                                                        options.length_penalty, options.length_penalty_form,
                                                        cut)):
                found[b] = nbest
        need_phrase_attention, supervised = options.return_phrase_attention, options.return_supervised_attention
        if not need_phrase_attention and not supervised:
            if options.return_attention:
                for nbest in found:
                    for h in nbest:
                        h.attention, h.final_attention = h.attention["attention"], h.final_attention["attention"]
            return found
        return with_named_rows(found, options.return_attention, supervised)
