"""Vanilla Transformer decoding on the CPU through the C kernels (model/cpu_kernels): a `StepBackend`.

It computes what `Transformer.decode_step` computes, with the same modules (embeddings, layer
norms, linear layers, float32 or int8-quantised), but keeps its own state:

- a paged self-attention cache: each step's keys and values stay where they were written (one
  column per step and layer), and a table (N, t) says which row of each column belongs to each
  beam. A beam reorder permutes the table (N·t int32) instead of copying every layer's cache, and
  a step appends a column instead of concatenating the cache;
- the cross-attention's projected memory once per sentence (B rows, not B·K): each beam row
  reads its sentence's row, so sentences leaving the batch cost nothing either.

Attention runs in `ops.self_attention` / `ops.cross_attention` (one query per row). Their sums
run in another order than PyTorch's kernels, so a step equals the eager step up to float
rounding, not bit for bit (tests/model/test_kernel_backend.py bounds the difference and
compares whole searches); which serving paths use it, and how that is verified, is in
docs/operations.md ("CPU decoding kernels").
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from model.attention.vanilla import VanillaAttention
from model.cpu_kernels import library, unavailable
from model.cpu_kernels import ops
from model.decoder_state import Memory
from model.transformer import StepOut, Transformer, head_average


# The decoders the torch backend runs a model on: the eager Transformer step, or these kernels.
EAGER, KERNELS = "eager", "kernels"


def decoder_for(model: Transformer) -> str:
    """The decoder that decodes `model` on the CPU when the kernels may be used: they, where they can."""
    return KERNELS if kernel_decoding_problem(model) is None else EAGER


def kernel_decoding_problem(model: Transformer) -> str | None:
    """Why `KernelBackend` cannot decode `model`; None when it can."""
    if library() is None:
        return f"the CPU kernels are unavailable: {unavailable()}"
    parameter = next(model.parameters())
    if parameter.device.type != "cpu" or parameter.dtype != torch.float32:
        return f"the kernels decode float32 models on the CPU, this one is {parameter.dtype} on {parameter.device}"
    config = model.config
    if config.phrase_representation is not None:
        return "phrase representations need the eager step"
    for index, layer in enumerate(model.decoder_layers):
        for site in ("self_attention", "cross_attention"):
            if type(getattr(layer, site)) is not VanillaAttention:
                kind = getattr(config, "decoder_self_attention" if site == "self_attention" else "cross_attention").kind
                wrapped = " with alignment biases" if config.alignment_biases else ""
                return f"decoder layer {index}'s {site.replace('_', '-')} is {kind}{wrapped}; the kernels run vanilla attention only"
    return None


@dataclass
class _Cache:
    """One layer's paged self-attention cache: the columns, and their addresses for the kernel."""

    k_columns: torch.Tensor  # (max_positions,) int64 addresses
    v_columns: torch.Tensor
    keep_alive: list[torch.Tensor]  # the column tensors themselves

    def append(self, step: int, k: torch.Tensor, v: torch.Tensor) -> None:
        self.k_columns[step] = k.data_ptr()
        self.v_columns[step] = v.data_ptr()
        self.keep_alive += [k, v]


@dataclass(frozen=True)
class PagedState:
    """The kernel backend's decoding state (module doc); rows sentence-major like `DecoderState`.

    step: tokens decoded so far; table (N, step) int32; sentence (N,) int32: the memory row each
    row reads; caches, memory_k / memory_v (per layer, (B, S, D)) and keep (B, S) uint8 are
    shared by every state of one search: a step only appends to the caches."""

    step: int
    table: torch.Tensor
    sentence: torch.Tensor
    caches: tuple[_Cache, ...]
    memory_k: tuple[torch.Tensor, ...]
    memory_v: tuple[torch.Tensor, ...]
    keep: torch.Tensor
    beam_size: int = 1

    def expand(self, beam_size: int) -> "PagedState":
        """B rows -> B·beam_size rows, every row repeated beam_size times."""
        rows = torch.arange(self.rows()).repeat_interleave(beam_size)
        return replace(self.reorder(rows), beam_size=beam_size)

    def reorder(self, index: torch.Tensor) -> "PagedState":
        """Keep rows `index` (N',) of the N rows, in that order."""
        return replace(self, table=self.table.index_select(0, index), sentence=self.sentence.index_select(0, index))

    def rows(self) -> int:
        return self.sentence.shape[0]


class KernelBackend:
    """The vanilla Transformer `model` (float32 or int8-quantised, on the CPU) as a step backend
    (model/decoding/generate.py) whose attention runs in the C kernels. Gives the alignment
    layer's attention; not phrase attention nor the supervised alignment head's rows.

    With ranks_logits (the default) its steps return the logits in place of the log-probs and
    the search takes each step's candidates from `candidates` (`ops.beam_candidates`: the
    log-softmax, the beam scores and the top 2K in one pass, beam_search.RankingDecoder) instead
    of writing and re-reading the (N, V) log-probs."""

    has_attention = True
    has_phrase_attention = False

    def __init__(self, model: Transformer, ranks_logits: bool = True):
        problem = kernel_decoding_problem(model)
        if problem:
            raise ValueError(problem)
        self.model = model
        self.config = model.config
        self.ranks_logits = ranks_logits
        self._banned: dict[tuple[int, ...], torch.Tensor] = {}

    def candidates(self, logits: torch.Tensor, scores: torch.Tensor, count: int, at_limit: list[int],
                   never: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """beam_search.RankingDecoder.candidates, `never` the tokens never generated."""
        banned = self._banned.get(tuple(never))
        if banned is None:
            banned = torch.zeros(logits.shape[1], dtype=torch.uint8)
            banned[never] = 1
            self._banned[tuple(never)] = banned
        eos_only = None
        if at_limit:
            eos_only = torch.zeros(scores.shape[0], dtype=torch.uint8)
            eos_only[at_limit] = 1
        return ops.beam_candidates(logits, scores.float(), banned, eos_only, self.config.eos_id, count)

    @torch.inference_mode()
    def encode(self, src: torch.Tensor) -> PagedState:
        memory: Memory = self.model.encode(src)
        layers = self.model.decoder_layers
        batch = src.shape[0]
        caches = tuple(_Cache(torch.zeros(self.config.max_positions, dtype=torch.long),
                              torch.zeros(self.config.max_positions, dtype=torch.long), []) for _ in layers)
        return PagedState(
            step=0,
            table=torch.empty(batch, 0, dtype=torch.int32),
            sentence=torch.arange(batch, dtype=torch.int32),
            caches=caches,
            memory_k=tuple(layer.cross_attention.k_proj(memory.states).contiguous() for layer in layers),
            memory_v=tuple(layer.cross_attention.v_proj(memory.states).contiguous() for layer in layers),
            keep=memory.pad_mask.logical_not().to(torch.uint8),
        )

    @torch.inference_mode()
    def step(self, tokens: torch.Tensor, state: PagedState, need_phrases: bool = False) -> StepOut:
        if need_phrases:
            raise ValueError("the kernel backend gives no phrase attention")
        model, config = self.model, self.config
        n, t = tokens.shape[0], state.step
        if t >= config.max_positions:
            raise ValueError(f"cannot decode past {config.max_positions} positions")
        heads = config.n_heads
        x = model.target_embedding(tokens.unsqueeze(1), t).squeeze(1)  # (N, D)
        table = torch.cat([state.table, torch.arange(n, dtype=torch.int32).unsqueeze(1)], dim=1)  # (N, t+1)
        probs = None
        for index, layer in enumerate(model.decoder_layers):
            h = layer.self_norm(x)
            site = layer.self_attention
            k, v = site.k_proj(h), site.v_proj(h)  # (N, D): this step's column
            state.caches[index].append(t, k, v)
            c = state.caches[index]
            context = ops.self_attention(site.q_proj(h), c.k_columns, c.v_columns, k.stride(0), table, heads)
            x = x + site.out_proj(context)
            site = layer.cross_attention
            aligned = index == config.alignment_layer_index
            context, layer_probs = ops.cross_attention(site.q_proj(layer.cross_norm(x)), state.memory_k[index],
                                                       state.memory_v[index], state.sentence, state.keep, heads, aligned)
            if aligned:
                probs = layer_probs
            x = x + site.out_proj(context)
            x = x + layer.ffn(layer.ffn_norm(x))
        logits = model._logits(model.decoder_norm(x))  # (N, V)
        new_state = replace(state, step=t + 1, table=table)
        scores = logits.float() if self.ranks_logits else torch.log_softmax(logits.float(), dim=-1)
        return StepOut(scores, head_average(probs), None, new_state, probs)
