"""Vanilla Transformer decoding on the CPU through the C kernels (model/cpu_kernels): a `StepBackend`.

It computes what `Transformer.decode_step` computes, with the same modules (embeddings, layer
norms, linear layers, float32 or int8-quantised), but keeps its own state:

- a paged self-attention cache: each step's keys and values stay where they were written (one
  column per step and layer), and a table (N, t) says which row of each column belongs to each
  beam. A beam reorder permutes the table (N·t int32) instead of copying every layer's cache, and
  a step appends a column instead of concatenating the cache;
- the cross-attention's projected memory once per sentence (B rows, not B·K): each beam row
  reads its sentence's row, so sentences leaving the batch cost nothing either.

Attention runs in decoding.c's `phrasal_self_attention` / `phrasal_cross_attention` (one query
per row; called directly, `ops` has their checked forms). Their sums
run in another order than PyTorch's kernels, so a step equals the eager step up to float
rounding, not bit for bit (tests/model/test_kernel_backend.py bounds the difference and
compares whole searches); which serving paths use it, and how that is verified, is in
docs/operations.md ("CPU decoding kernels").
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import nn

from model.attention.functional import attention_mask
from model.attention.vanilla import VanillaAttention
from model.cpu_kernels import MAX_HEAD_DIM, MAX_KEYS, library, unavailable
from model.cpu_kernels import ops
from model.decoder_state import Memory
from model.int8_linear import Int8Linear, agreement_problem, scratch_bytes
from model.decoding.selection import Selection
from model.transformer import StepOut, Transformer


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
    # An attention row reads at most max_positions keys (source positions or steps).
    if config.max_positions > MAX_KEYS:
        return f"max_positions {config.max_positions} exceeds the kernels' {MAX_KEYS} keys an attention row"
    if config.d_model // config.n_heads > MAX_HEAD_DIM:
        return f"heads of {config.d_model // config.n_heads} dimensions exceed the kernels' {MAX_HEAD_DIM}"
    for index, layer in enumerate(model.decoder_layers):
        for site in ("self_attention", "cross_attention"):
            if type(getattr(layer, site)) is not VanillaAttention:
                kind = getattr(config, "decoder_self_attention" if site == "self_attention" else "cross_attention").kind
                wrapped = " with alignment biases" if config.alignment_biases else ""
                return f"decoder layer {index}'s {site.replace('_', '-')} is {kind}{wrapped}; the kernels run vanilla attention only"
    return None


class _Cache:
    """One layer's paged self-attention cache: the columns, and their addresses for the kernel."""

    def __init__(self, max_positions: int):
        self.k_columns = torch.zeros(max_positions, dtype=torch.long)  # (max_positions,) int64 addresses
        self.v_columns = torch.zeros(max_positions, dtype=torch.long)
        self.keep_alive: list[torch.Tensor] = []  # the column tensors themselves
        # Written through memoryviews: a tensor's item assignment costs microseconds, and a step
        # writes two addresses per layer.
        self._k = memoryview(self.k_columns.numpy())
        self._v = memoryview(self.v_columns.numpy())

    def append(self, step: int, written: torch.Tensor, k_address: int, v_address: int) -> None:
        """Step `step`'s column: keys and values at these addresses, inside `written` (kept alive here)."""
        self._k[step] = k_address
        self._v[step] = v_address
        self.keep_alive.append(written)


@dataclass(frozen=True)
class _LayerLinears:
    """An encoder or decoder layer's linear layers as bare functions (`_layer_linears`)."""

    qkv: Callable[[torch.Tensor], torch.Tensor]
    self_out: Callable[[torch.Tensor], torch.Tensor]
    cross_q: Callable[[torch.Tensor], torch.Tensor] | None  # decoder layers only
    cross_out: Callable[[torch.Tensor], torch.Tensor] | None
    up_relu: Callable[[torch.Tensor], torch.Tensor]
    down: Callable[[torch.Tensor], torch.Tensor]


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
    rows_per_sentence: int = 1
    plan: torch.Tensor | None = None  # FusedStep's plan with this search's memory and caches; None: no fused step

    def expand(self, rows_per_sentence: int) -> "PagedState":
        """B rows -> B·rows_per_sentence rows, every row repeated rows_per_sentence times."""
        rows = torch.arange(self.rows()).repeat_interleave(rows_per_sentence)
        return replace(self.reorder(rows), rows_per_sentence=rows_per_sentence)

    def reorder(self, index: torch.Tensor) -> "PagedState":
        """Keep rows `index` (N',) of the N rows, in that order."""
        return replace(self, table=self.table.index_select(0, index), sentence=self.sentence.index_select(0, index))

    def rows(self) -> int:
        return self.sentence.shape[0]


def fused_linear(parts: list[nn.Module]) -> nn.Module:
    """One linear layer computing the given ones side by side (their outputs concatenated), float32
    or int8 like them (`Int8Linear.side_by_side`: their outputs bit for bit): one GEMM instead of
    three small ones, which on a CPU cost mostly their fixed overhead."""
    if all(type(part) is nn.Linear for part in parts):
        fused = nn.Linear(parts[0].in_features, sum(p.out_features for p in parts), bias=True)
        with torch.no_grad():
            fused.weight.copy_(torch.cat([p.weight for p in parts]))
            fused.bias.copy_(torch.cat([p.bias if p.bias is not None else torch.zeros(p.out_features) for p in parts]))
        return fused.eval()
    if all(type(part) is Int8Linear for part in parts):
        return Int8Linear.side_by_side(parts)
    raise ValueError(f"cannot fuse linear layers of types {sorted({type(p).__name__ for p in parts})}")


def bare_linear(module: nn.Module, relu: bool = False) -> Callable[[torch.Tensor], torch.Tensor]:
    """`module`'s function (with `relu`, followed by a ReLU) without nn.Module's call machinery (a
    few µs a call, and a decoding step makes some 25 calls): F.linear on its weights, or the int8
    kernel on its packed weights (`Int8Linear.function`)."""
    if type(module) is nn.Linear:
        weight, bias = module.weight, module.bias
        if relu:
            return lambda x: F.relu(F.linear(x, weight, bias))
        return lambda x: F.linear(x, weight, bias)
    if type(module) is Int8Linear:
        return module.function(relu)
    return (lambda x: F.relu(module(x))) if relu else module


def output_function(model: Transformer) -> Callable[[torch.Tensor], torch.Tensor]:
    """The logits' projection (rows, D) -> (rows, V): the tied embedding table in float32 (in C), or
    the int8 projection's kernel."""
    projection = model.output_projection
    if projection is None:
        # decoding.c's float_linear on the table packed once: 1.5-2.8x PyTorch's GEMM on the
        # development CPU (82.6 -> 54.7 µs for one row of the bundled model, 4.5 -> 1.6 ms for 160;
        # results/fused_step_cpu.md), equal up to rounding (export/kernels_check.py verifies the
        # decoder per model).
        return float_function(model.source_embedding.tokens.weight, None)
    return bare_linear(projection)


def float_function(weight: torch.Tensor, bias: torch.Tensor | None) -> Callable[[torch.Tensor], torch.Tensor]:
    """x (rows, in) -> x · weightᵀ + bias (rows, out) in decoding.c's float_linear, the float32
    weights packed once (kept by the function)."""
    linear, lib = _FloatLinear.of(weight, bias), library()
    out_features, in_features = weight.shape

    def apply(x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty(x.shape[0], out_features)
        lib.phrasal_float_linear(x.data_ptr(), x.shape[0], in_features, linear.weights.data_ptr(),
                                 linear.bias.data_ptr() if linear.bias is not None else None, out_features, 0,
                                 out.data_ptr())
        return out

    return apply


def _layer_linears(layer: nn.Module) -> _LayerLinears:
    """An encoder or decoder layer's linear layers as bare functions, its self-attention's query,
    key and value projections fused into one (rows, 3D); the cross-attention's where it has one."""
    attention, cross = layer.self_attention, getattr(layer, "cross_attention", None)
    return _LayerLinears(
        qkv=bare_linear(fused_linear([attention.q_proj, attention.k_proj, attention.v_proj])),
        self_out=bare_linear(attention.out_proj),
        cross_q=bare_linear(cross.q_proj) if cross is not None else None,
        cross_out=bare_linear(cross.out_proj) if cross is not None else None,
        up_relu=bare_linear(layer.ffn.up, relu=True),
        down=bare_linear(layer.ffn.down),
    )


def _norm_arguments(norm: nn.LayerNorm) -> tuple[torch.Tensor, torch.Tensor, float]:
    """A layer norm as phrasal_add_layer_norm reads it: weight, bias, eps (checked once; the
    addresses are read at each call, so a model whose parameters are replaced stays safe)."""
    for name, tensor in (("weight", norm.weight), ("bias", norm.bias)):
        if tensor is None or tensor.dtype != torch.float32 or not tensor.is_contiguous() or tensor.device.type != "cpu":
            raise ValueError(f"the kernels need a layer norm {name} in contiguous float32 on the CPU")
    return norm.weight, norm.bias, float(norm.eps)


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
        # Per decoder layer its linear layers as bare functions, each self-attention's query, key
        # and value projections fused into one (N, 3D).
        self.linears = [_layer_linears(layer) for layer in model.decoder_layers]
        # The encoder's, likewise, where every encoder site is vanilla attention (else model.encode).
        self.encoder_linears = None
        if all(type(layer.self_attention) is VanillaAttention for layer in model.encoder_layers):
            self.encoder_linears = [_layer_linears(layer) for layer in model.encoder_layers]
        self.output = output_function(model)
        self._banned: dict[tuple[int, ...], torch.Tensor] = {}
        self._lib = library()
        self._attention_scale = 1.0 / math.sqrt(self.config.d_model // self.config.n_heads)
        embedding = model.target_embedding
        self._target_table, self._target_scale, self._positions = embedding.tokens.weight, embedding.scale, embedding.positions
        # The decoder's layer norms in the order a step applies them: each layer's self, cross and
        # feed-forward norm, then the final one.
        norms = [norm for layer in model.decoder_layers for norm in (layer.self_norm, layer.cross_norm, layer.ffn_norm)]
        self._norms = [_norm_arguments(norm) for norm in norms + [model.decoder_norm]]
        # The whole decoder step in one kernel call (FusedStep); None: one call per layer.
        self._fused_step = FusedStep.for_backend(self)
        # The whole encoder in one kernel call (FusedEncoder); None: per layer.
        self._fused_encoder = FusedEncoder.for_backend(self)
        # Each decoder layer's projections of the memory into keys and values, once a batch: in
        # float_linear where the step's layers are (the module calls cost more than their
        # arithmetic for a sentence's few rows), else the modules' own functions.
        float_layers = self._fused_step is not None and not self._fused_step.int8
        self._memory_projections = [
            tuple(float_function(module.weight, module.bias) if float_layers else bare_linear(module)
                  for module in (layer.cross_attention.k_proj, layer.cross_attention.v_proj))
            for layer in model.decoder_layers]

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

    def select(self, values: torch.Tensor, index: torch.Tensor, vocab: int, eos_id: int, beam: int) -> Selection:
        """model.decoding.selection.select on `candidates`' output, in one kernel call (bit for bit)."""
        return Selection(*ops.select(values, index, vocab, eos_id, beam))

    def _encode(self, src: torch.Tensor) -> Memory:
        """`Transformer.encode` with the bare and fused linear layers and the residual + layer norm
        kernel; the attention over the whole source stays PyTorch's fused kernel."""
        model, config = self.model, self.config
        pad_mask = src.eq(config.pad_id)  # (B, S)
        x = model.source_embedding(src)  # (B, S, D)
        b, length, d = x.shape
        if self._fused_encoder is not None:
            keep = pad_mask.logical_not().to(torch.uint8).contiguous()
            return Memory(self._fused_encoder.run(x, keep).view(b, length, d), pad_mask)
        heads = config.n_heads
        mask = attention_mask(pad_mask, length, length, False, src.device)
        layers = model.encoder_layers
        # Once a batch, so each norm is checked at each call (`_norm_arguments`); the step keeps them.
        x, h = self._add_norm(x.reshape(b * length, d), None, _norm_arguments(layers[0].self_norm))
        for index, (layer, linear) in enumerate(zip(layers, self.encoder_linears)):
            q, k, v = linear.qkv(h).view(b, length, 3, heads, d // heads).permute(2, 0, 3, 1, 4)  # (B, H, S, dh) each
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(b * length, d)
            x, h = self._add_norm(x, linear.self_out(context), _norm_arguments(layer.ffn_norm))
            after = layers[index + 1].self_norm if index + 1 < len(layers) else model.encoder_norm
            x, h = self._add_norm(x, linear.down(linear.up_relu(h)), _norm_arguments(after))
        return Memory(h.view(b, length, d), pad_mask)

    @torch.inference_mode()
    def encode(self, src: torch.Tensor) -> PagedState:
        memory = self.model.encode(src) if self.encoder_linears is None else self._encode(src)
        batch, length, d = memory.states.shape
        caches = tuple(_Cache(self.config.max_positions) for _ in self.model.decoder_layers)
        states = memory.states.reshape(batch * length, d)
        memory_k = tuple(k(states).view(batch, length, -1) for k, _ in self._memory_projections)
        memory_v = tuple(v(states).view(batch, length, -1) for _, v in self._memory_projections)
        return PagedState(
            step=0,
            table=torch.empty(batch, 0, dtype=torch.int32),
            sentence=torch.arange(batch, dtype=torch.int32),
            caches=caches,
            memory_k=memory_k,
            memory_v=memory_v,
            keep=memory.pad_mask.logical_not().to(torch.uint8),
            plan=self._fused_step.plan_for(memory_k, memory_v, caches) if self._fused_step is not None else None,
        )

    @torch.inference_mode()
    def step(self, tokens: torch.Tensor, state: PagedState, need_phrase_attention: bool = False) -> StepOut:
        if need_phrase_attention:
            raise ValueError("the kernel backend gives no phrase attention")
        config = self.config
        n, t = tokens.shape[0], state.step
        if t >= config.max_positions:
            raise ValueError(f"cannot decode past {config.max_positions} positions")
        k = state.rows_per_sentence
        rows = torch.arange(n, dtype=torch.int32)
        if t == 0 and k > 1 and torch.equal(state.sentence, state.sentence[::k].repeat_interleave(k)):
            # The first step reads only BOS: every beam of a sentence computes the same row, so it
            # is computed once per sentence (as CTranslate2 does on the CPU) and column 0 of the
            # cache is read by all of a sentence's beams. Beams other than the first start at -inf,
            # so the search reads only their sentence's first row of the logits.
            logits, attention = self._layers(tokens[::k], state.sentence[::k].contiguous(), rows[: n // k].unsqueeze(1), state)
            table = rows.div(k, rounding_mode="floor").unsqueeze(1)  # (N, 1)
            if self.ranks_logits:
                expanded = logits.new_empty(n, logits.shape[1])  # rows of the other beams are never read
                expanded[::k] = logits
                logits = expanded
            else:
                logits = logits.repeat_interleave(k, dim=0)
            attention = attention.repeat_interleave(k, dim=0)
        else:
            table = torch.cat([state.table, rows.unsqueeze(1)], dim=1)  # (N, t+1)
            logits, attention = self._layers(tokens, state.sentence, table, state)
        new_state = replace(state, step=t + 1, table=table)
        scores = logits if self.ranks_logits else torch.log_softmax(logits, dim=-1)
        return StepOut(scores, attention, None, new_state)

    def _layers(self, tokens: torch.Tensor, sentence: torch.Tensor, table: torch.Tensor,
                state: PagedState) -> tuple[torch.Tensor, torch.Tensor]:
        """The decoder on `tokens` (M,) at step state.step, row m reading memory row sentence[m]
        and cache rows table[m]; appends this step's cache column. Returns the logits (M, V) float32
        and the alignment layer's attention, heads averaged (M, S).

        The kernels are called here directly, not through `ops`: at one sentence's few rows a
        step's cost was mostly Python around them (checks, views, ~30 µs a kernel call by cProfile),
        and every tensor they read is made here or in `encode`, contiguous float32 (int32 table and
        rows, uint8 mask), in the shapes `ops` checks; tests/model/test_kernel_backend.py compares
        this path with `ops` and with the eager step."""
        config, lib = self.config, self._lib
        t, heads, d = state.step, config.n_heads, config.d_model
        m, head_size, scale = tokens.shape[0], d // config.n_heads, self._attention_scale
        steps, table_stride = table.shape[1], table.stride(0)
        # The target embedding as TokenEmbedding computes it (same operations, same order).
        x = torch.embedding(self._target_table, tokens).mul_(self._target_scale).add_(self._positions[t])
        if state.plan is not None:
            h, attention = self._fused_step.run(state, x, table, sentence)
            return self.output(h).float(), attention
        # Every residual sum goes with the layer norm after it (phrasal_add_layer_norm): x is the
        # residual stream, h its normalised copy that the next sub-layer reads.
        x, h = self._add_norm(x, None, self._norms[0])
        attention = None
        bytes_d = 4 * d  # float32
        for index, linear in enumerate(self.linears):
            cross_norm, ffn_norm = self._norms[3 * index + 1: 3 * index + 3]
            after = self._norms[3 * index + 3]
            qkv = linear.qkv(h)  # (M, 3D); its keys and values are this step's column
            cache = state.caches[index]
            address = qkv.data_ptr()
            cache.append(t, qkv, address + bytes_d, address + 2 * bytes_d)
            context = torch.empty(m, d)
            if lib.phrasal_self_attention(address, 3 * d, cache.k_columns.data_ptr(), cache.v_columns.data_ptr(),
                                          3 * d, table.data_ptr(), table_stride, m, heads, steps, head_size, scale,
                                          context.data_ptr(), d):
                raise ValueError(f"self-attention over {steps} steps with head size {head_size} exceeds the kernel's limits")
            x, h = self._add_norm(x, linear.self_out(context), cross_norm)
            q = linear.cross_q(h)
            memory_k, memory_v = state.memory_k[index], state.memory_v[index]
            length = memory_k.shape[1]
            aligned = index == config.alignment_layer_index
            context = torch.empty(m, d)
            layer_attention = torch.empty(m, length) if aligned else None
            if lib.phrasal_cross_attention(q.data_ptr(), d, memory_k.data_ptr(), memory_v.data_ptr(), d, length * d,
                                           sentence.data_ptr(), state.keep.data_ptr(), state.keep.stride(0), m, heads,
                                           length, head_size, scale, context.data_ptr(), d,
                                           layer_attention.data_ptr() if aligned else None):
                raise ValueError(f"cross-attention over {length} positions with head size {head_size} exceeds the kernel's limits")
            if aligned:
                attention = layer_attention
            x, h = self._add_norm(x, linear.cross_out(context), ffn_norm)
            x, h = self._add_norm(x, linear.down(linear.up_relu(h)), after)  # the feed-forward (dropout off)
        return self.output(h).float(), attention

    def _add_norm(self, x: torch.Tensor, y: torch.Tensor | None,
                  norm: tuple[torch.Tensor, torch.Tensor, float]) -> tuple[torch.Tensor, torch.Tensor]:
        """(x + y, layer_norm(x + y)) for contiguous (M, D) x and y (y None: (x, layer_norm(x)));
        `norm` the layer norm's weight, bias and eps (`_norm_arguments`)."""
        total = torch.empty_like(x) if y is not None else x
        normalised = torch.empty_like(x)
        self._lib.phrasal_add_layer_norm(x.data_ptr(), y.data_ptr() if y is not None else None, x.shape[0], x.shape[1],
                                         norm[0].data_ptr(), norm[1].data_ptr(), norm[2], total.data_ptr(),
                                         normalised.data_ptr())
        return total, normalised


def pack_float(weight: torch.Tensor) -> torch.Tensor:
    """(out, in) float32 weights in decoding.c's float_linear layout: blocks of 16 output channels,
    each (in, 16); zero weights pad the outputs."""
    out_features, in_features = weight.shape
    n16 = -(-out_features // 16) * 16
    padded = torch.zeros(n16, in_features)
    padded[:out_features] = weight.detach()
    return padded.view(n16 // 16, 16, in_features).transpose(1, 2).contiguous()


@dataclass(frozen=True)
class _FloatLinear:
    """A float32 linear layer packed for float_linear (what the plan and the fused calls read of it)."""

    weights: torch.Tensor
    bias: torch.Tensor | None
    out_features: int

    @classmethod
    def of(cls, weight: torch.Tensor, bias: torch.Tensor | None) -> "_FloatLinear":
        return cls(pack_float(weight), bias.detach().contiguous() if bias is not None else None, weight.shape[0])


def _linear_addresses(linear: "Int8Linear | _FloatLinear") -> list[int]:
    """A packed linear layer as decoding.c's plan_linear: weights, row sums, scales, bias (0: none)."""
    if type(linear) is Int8Linear:
        weights, sums, scales = linear.packed, linear.sums, linear.weight_scale
    else:
        weights, sums, scales = linear.weights, None, None
    return [weights.data_ptr(), sums.data_ptr() if sums is not None else 0, scales.data_ptr() if scales is not None else 0,
            linear.bias.data_ptr() if linear.bias is not None else 0]


def _fused(cls, backend: "KernelBackend", layers: list[nn.Module], eps: list[float]):
    """`cls(backend, int8, eps)` (FusedEncoder or FusedStep) where the encoder or decoder layers
    `layers` can run in decoding.c's fused calls: their linear layers all float32 nn.Linear, or all
    Int8Linear on a machine where the int8 kernel gives its reference's numbers
    (`agreement_problem`), and one eps for all their norms (`eps`); None otherwise (one call per
    layer)."""
    modules = [module for layer in layers for module in _layer_sites(layer)]
    if len(set(eps)) != 1:
        return None
    if all(type(module) is nn.Linear and module.weight.dtype == torch.float32 for module in modules):
        int8 = False
    elif all(type(module) is Int8Linear for module in modules) and agreement_problem() is None:
        int8 = True
    else:
        return None
    return cls(backend, int8, eps[0])


def _layer_sites(layer: nn.Module) -> list[nn.Module]:
    """An encoder or decoder layer's linear layers in decoding.c's plan order: query, key and value
    (fused into one there), the attention's output, the cross-attention's query and output (decoder
    layers), the feed-forward's two."""
    attention, cross = layer.self_attention, getattr(layer, "cross_attention", None)
    crossing = [cross.q_proj, cross.out_proj] if cross is not None else []
    return [attention.q_proj, attention.k_proj, attention.v_proj, attention.out_proj, *crossing, layer.ffn.up,
            layer.ffn.down]


def _packed_layer(layer: nn.Module, int8: bool) -> list["Int8Linear | _FloatLinear"]:
    """`_layer_sites(layer)` packed for the kernel, query, key and value as one: a plan_layer's (or
    plan_encoder_layer's) linear layers in order (decoding.c applies the feed-forward's ReLU)."""
    q, k, v, *others, up, down = _layer_sites(layer)
    pack = (lambda module: module) if int8 else (lambda module: _FloatLinear.of(module.weight, module.bias))
    return [pack(fused_linear([q, k, v]))] + [pack(module) for module in others] + [pack(up), pack(down)]


class FusedEncoder:
    """KernelBackend._encode in one call of decoding.c's `phrasal_encoder`, at any size: its linear
    layers as FusedStep's, its self-attention
    in the cross-attention kernel in place of PyTorch's fused attention (equal up to rounding, int8
    too: export/kernels_check.py and export/int8_check.py verify each model)."""

    def __init__(self, backend: "KernelBackend", int8: bool, eps: float):
        model = backend.model
        self.int8, self.eps = int8, eps
        layers = model.encoder_layers
        self.linears = [_packed_layer(layer, int8) for layer in layers]
        self.norms = [_norm_arguments(layers[0].self_norm)]  # kept: the plan holds their addresses
        rows = []
        for index, (layer, linears) in enumerate(zip(layers, self.linears)):
            after = layers[index + 1].self_norm if index + 1 < len(layers) else model.encoder_norm
            norms = [_norm_arguments(layer.ffn_norm), _norm_arguments(after)]
            self.norms += norms
            rows.append([address for linear in linears for address in _linear_addresses(linear)]
                        + [norms[0][0].data_ptr(), norms[0][1].data_ptr(), norms[1][0].data_ptr(), norms[1][1].data_ptr()])
        self.plan = torch.tensor(rows, dtype=torch.int64)
        self.first_norm = torch.tensor([self.norms[0][0].data_ptr(), self.norms[0][1].data_ptr()], dtype=torch.int64)
        config = backend.config
        self.d, self.heads, self.d_ff = config.d_model, config.n_heads, self.linears[0][2].out_features
        self.scale = 1.0 / math.sqrt(self.d // self.heads)
        self.widest = max(self.d, self.d_ff)  # the widest quantised input
        self._lib = backend._lib

    @classmethod
    def for_backend(cls, backend: "KernelBackend") -> "FusedEncoder | None":
        if backend.encoder_linears is None:
            return None
        layers = backend.model.encoder_layers
        norms = [layer.self_norm for layer in layers] + [layer.ffn_norm for layer in layers] + [backend.model.encoder_norm]
        return _fused(cls, backend, layers, [float(norm.eps) for norm in norms])

    def run(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """The encoder's output (B·S, D) for the embedded source x (B, S, D) and keep (B, S) uint8."""
        b, length, d = x.shape
        rows = b * length
        x = x.reshape(rows, d).contiguous()
        h, qkv = torch.empty(rows, d), torch.empty(rows, 3 * d)
        work = torch.empty(rows * (2 * d + self.d_ff))
        quantized = torch.empty(scratch_bytes(rows, self.widest) if self.int8 else 0, dtype=torch.uint8)
        sentence = torch.arange(b, dtype=torch.int32).repeat_interleave(length)
        if self._lib.phrasal_encoder(self.plan.data_ptr(), len(self.linears), self.first_norm.data_ptr(), self.eps,
                                     x.data_ptr(), rows, d, self.d_ff, self.heads, self.scale, sentence.data_ptr(),
                                     keep.data_ptr(), length, int(self.int8), h.data_ptr(),
                                     qkv.data_ptr(), work.data_ptr(), quantized.data_ptr()):
            raise ValueError(f"a source of {length} positions exceeds the attention kernel's limits")
        return h


class FusedStep:
    """KernelBackend._layers in one call of decoding.c's `phrasal_decoder_step`, without the ~45
    Python and ctypes calls of a step that cost several times its arithmetic at a sentence's few
    rows, at any size. int8: the same kernels in the same order, the same numbers bit for bit
    (tests/model/test_int8_linear.py); float32: its linear
    layers in decoding.c's float_linear, equal to PyTorch's up to float rounding
    (export/kernels_check.py verifies each model).

    The plan is a (layers, 34) int64 table of addresses, decoding.c's `plan_layer`: per layer its
    six linear layers (packed weights, row sums, scales, bias), three norms (weight, bias), then
    per search the projected memory and the cache's column addresses (`plan_for`)."""

    SEARCH_FIELDS = 4  # memory_k, memory_v, k_columns, v_columns

    def __init__(self, backend: "KernelBackend", int8: bool, eps: float):
        self.backend = backend
        self.int8 = int8
        model, config = backend.model, backend.config
        # Each layer's six linear layers packed for the kernel; they keep every address in the plan alive.
        self.linears = [_packed_layer(layer, int8) for layer in model.decoder_layers]
        self.d, self.heads = config.d_model, config.n_heads
        self.d_ff = self.linears[0][4].out_features
        self.eps = eps
        aligned = config.alignment_layer_index
        self.aligned = aligned if 0 <= aligned < len(self.linears) else -1
        rows = []
        for index, layer in enumerate(self.linears):
            row = [address for linear in layer for address in _linear_addresses(linear)]
            for weight, bias, _ in backend._norms[3 * index + 1: 3 * index + 4]:
                row += [weight.data_ptr(), bias.data_ptr()]
            rows.append(row + [0] * self.SEARCH_FIELDS)
        self.plan = torch.tensor(rows, dtype=torch.int64)
        first = backend._norms[0]
        self.first_norm = torch.tensor([first[0].data_ptr(), first[1].data_ptr()], dtype=torch.int64)
        self.widest = max(self.d, self.d_ff)  # the widest quantised input

    @classmethod
    def for_backend(cls, backend: "KernelBackend") -> "FusedStep | None":
        """The fused step for `backend`'s model, or None where it does not apply: layers neither all
        float32 nor all int8, an int8 model on a machine where the int8 kernel does not give its
        reference's numbers (`agreement_problem`), norms with different eps."""
        return _fused(cls, backend, backend.model.decoder_layers, [eps for _, _, eps in backend._norms])

    def plan_for(self, memory_k: tuple[torch.Tensor, ...], memory_v: tuple[torch.Tensor, ...],
                 caches: tuple["_Cache", ...]) -> torch.Tensor:
        """The plan with one search's memory and caches filled in."""
        plan = self.plan.clone()
        plan[:, -self.SEARCH_FIELDS:] = torch.tensor(
            [[k.data_ptr(), v.data_ptr(), cache.k_columns.data_ptr(), cache.v_columns.data_ptr()]
             for k, v, cache in zip(memory_k, memory_v, caches)], dtype=torch.int64)
        return plan

    def run(self, state: PagedState, x: torch.Tensor, table: torch.Tensor,
            sentence: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The decoder on the embedded input x (m, D) at step state.step: appends this step's cache
        column to every layer, returns the final norm's output (m, D) and the alignment layer's
        attention (m, S) (None where the model names no decoder layer for it)."""
        m, d, t = x.shape[0], self.d, state.step
        qkv = torch.empty(len(self.linears), m, 3 * d)
        address, row_bytes = qkv.data_ptr(), 4 * m * 3 * d
        for index, cache in enumerate(state.caches):
            start = address + index * row_bytes
            cache.append(t, qkv, start + 4 * d, start + 8 * d)
        h = torch.empty(m, d)
        # Scratch per step, not per backend: searches in two threads may share the backend.
        work = torch.empty(m * (3 * d + self.d_ff))
        quantized = torch.empty(scratch_bytes(m, self.widest) if self.int8 else 0, dtype=torch.uint8)
        length = state.memory_k[0].shape[1]
        attention = torch.empty(m, length) if self.aligned >= 0 else None
        if self.backend._lib.phrasal_decoder_step(
                state.plan.data_ptr(), len(self.linears), self.first_norm.data_ptr(), self.eps, x.data_ptr(), m, d,
                self.d_ff, self.heads, self.backend._attention_scale, table.data_ptr(), table.stride(0), table.shape[1],
                sentence.data_ptr(), state.keep.data_ptr(), state.keep.stride(0), length, self.aligned,
                int(self.int8), qkv.data_ptr(), h.data_ptr(), attention.data_ptr() if attention is not None else None,
                work.data_ptr(), quantized.data_ptr()):
            raise ValueError(f"attention over {table.shape[1]} steps or {length} positions exceeds the kernel's limits")
        return h, attention
