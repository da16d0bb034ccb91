"""Tiny models built inside the tests: no network, no big files."""
from __future__ import annotations

import ast
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import torch

from model.config import ModelConfig
from model.transformer import Transformer


# Float tolerances (assert_close_for). Where two computations do the same operations in the same
# order, tests compare with torch.equal or atol=0; where they do the same maths in another order (a
# batch against a row alone, a cached step against the full pass, a C kernel or a fused op against
# torch, float32 code against a hand formula in float64), each rounding that can differ moves the
# result by at most eps(dtype) relative to the magnitude it works on, so n such roundings (a sum of
# n terms reassociated) stay within n * eps * magnitude (Higham, "Accuracy and Stability of Numerical
# Algorithms", 2nd ed., eq. 4.4). `ops` is that n, stated per comparison:
#   HAND_FORMULA_OPS: a value the test also writes out by hand over a handful of terms (a softmax
#     over <= 8 scores, a weighted sum of <= 8 vectors): one rounding per term, and exp's relative
#     error grows with its argument, which the magnitude (>= 1) covers;
#   TINY_MODEL_OPS: anything out of a tiny_model forward or step: its widest reduction is d_ff = 64
#     terms; the roundings of its 4 layers' reductions add up like a random walk, about
#     sqrt(4 * 64) = 16 eps in practice, so the linear bound of the widest one (64) holds with margin.
HAND_FORMULA_OPS = 8
TINY_MODEL_OPS = 64


def tolerance_for(ops: int, magnitude: float = 1.0, dtype: torch.dtype = torch.float32) -> float:
    """The absolute tolerance for a value of `magnitude` (at least 1) that went through `ops`
    roundings in `dtype` which may happen in another order: ops * eps(dtype) * magnitude."""
    return ops * torch.finfo(dtype).eps * max(1.0, magnitude)


def assert_close_for(actual: Any, expected: Any, *, ops: int, magnitude: float | None = None,
                     dtype: torch.dtype | None = None, msg: str | None = None) -> None:
    """`actual` equals `expected` up to `ops` reordered roundings (tolerance_for): magnitude is the
    largest |expected| unless given; dtype the precision the compared values were computed in:
    by default that of `actual`, float32 where it is a Python number (give it where float32 results
    were widened to float64). Tensors, numbers and lists of numbers alike."""
    if isinstance(actual, torch.Tensor):
        actual_t, dtype = actual, dtype or actual.dtype
    else:  # Python floats are doubles: compare them as such, at the precision of the code that made them
        actual_t, dtype = torch.as_tensor(actual, dtype=torch.float64), dtype or torch.float32
    expected_t = torch.as_tensor(expected, dtype=torch.float64)
    if expected_t.dim() == 0:  # one number stands for every element
        expected_t = expected_t.expand(actual_t.shape)
    if magnitude is None:
        finite = expected_t[expected_t.isfinite()]  # -inf log-probs must match exactly, not widen the tolerance
        magnitude = finite.abs().max().item() if finite.numel() else 1.0
    atol = tolerance_for(ops, magnitude, dtype)
    # compared in float64, so that the comparison itself rounds nothing
    torch.testing.assert_close(actual_t.double(), expected_t, atol=atol, rtol=0, msg=msg)


def tiny_config(**overrides) -> ModelConfig:
    values = dict(vocab_size=500, d_model=32, n_heads=4, d_ff=64, encoder_layers=2, decoder_layers=2,
                  dropout=0.0, max_positions=128)
    values.update(overrides)
    return ModelConfig(**values)


def tiny_model(seed: int = 0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(tiny_config(**overrides)).eval()


def randomise_biases(model: Transformer, seed: int = 0) -> Transformer:
    """Random alignment-bias weights (they start at zero, where a biased model equals the plain
    one), so that every bias term changes the outputs a test compares."""
    generator = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if ".biases." in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator))
    return model


def chunk_spans(chunks: torch.Tensor) -> list[list[tuple[int, int]]]:
    """Readable segmentation: chunks (B, S) -> per row the [start, end) of each chunk, in order."""
    return [[(j, j + n) for j, n in enumerate(row) if n > 0] for row in chunks.tolist()]


def imported_packages(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def imported_modules(path: Path) -> set[str]:
    """Every absolute module name a file imports, anywhere in it (function bodies and
    TYPE_CHECKING blocks included): ``from a.b import c`` gives "a.b" and "a.b.c"."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_cycles(root: Path, package: str) -> list[list[str]]:
    """The import cycles among ``package``'s modules (files under root/package): each strongly
    connected group of more than one module, sorted (Tarjan's algorithm)."""
    files = {module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}
    edges: dict[str, set[str]] = {}
    for name, path in files.items():
        targets = set()
        for imported in imported_modules(path):
            while imported and imported not in files:  # "a.b.c" names a function of module a.b
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        edges[name] = targets
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for name in edges:
        if name not in index:
            visit(name)
    return sorted(groups)


class FullPassDecoder:
    """An IncrementalDecoder with no cache: every step re-runs the whole model on each row's
    prefix, so beam search over it is the reference that the cached decoder must equal."""

    def __init__(self, model, src):
        self.model, self.src, self.prefix = model, src, None

    def step(self, tokens):
        self.prefix = tokens[:, None] if self.prefix is None else torch.cat([self.prefix, tokens[:, None]], 1)
        out = self.model(self.src, self.prefix, need_attention=True)
        log_probs = torch.log_softmax(out.logits[:, -1].float(), -1)
        log_probs[:, [0, 1]] = float("-inf")  # pad and BOS are never generated (model.decoding.generate)
        return log_probs, out.attention[:, -1]

    def reorder(self, index):
        self.prefix = self.prefix.index_select(0, index)
        self.src = self.src.index_select(0, index)


def assert_cached_search_equals_uncached(model, src, max_length_offset: int = 2, beam: int = 3) -> None:
    """Beam search over the cached decoder (model.decoding.generate) returns exactly the hypotheses,
    scores and attention of beam search over FullPassDecoder: the decoding state, and its
    reordering with the beam, change nothing."""
    from model.decoding.beam_search import beam_search
    from model.decoding.generate import generate, max_lengths
    from model.decoding.options import DecodingOptions

    options = DecodingOptions(
        beam_size=beam, n_best=beam, max_length_ratio=1.0, max_length_offset=max_length_offset, alignment="token"
    )
    cached = generate(model, src, options)
    with torch.inference_mode():
        uncached = beam_search(
            FullPassDecoder(model, src.repeat_interleave(beam, 0)), options, batch_size=src.shape[0],
            bos_id=model.config.bos_id, eos_id=model.config.eos_id,
            max_lengths=max_lengths(src, model.config.pad_id, options, model.config.max_positions - 1),
            return_attention=True,
        )
    for a_list, b_list in zip(cached, uncached, strict=True):
        assert [a.tokens for a in a_list] == [b.tokens for b in b_list]
        for a, b in zip(a_list, b_list):
            assert_close_for(a.score, b.score, ops=TINY_MODEL_OPS)
            assert_close_for(a.attention, b.attention, ops=TINY_MODEL_OPS)


def assert_incremental_equals_full_pass(model, src, tgt_in, state=None):
    """Feeding tgt_in token by token through decode_step with phrases gives, at every step, the
    full pass's log-probs, attention and phrase attention (up to TINY_MODEL_OPS roundings), and decode_step without
    phrases gives the same numbers and state names. Returns the final state (every tensor batch-first)."""
    full = model(src, tgt_in, need_attention=True)
    full_log_probs = torch.log_softmax(full.logits, dim=-1)
    state = model.init_state(model.encode(src)) if state is None else state
    for t in range(tgt_in.shape[1]):
        step = model.decode_step(tgt_in[:, t], state, need_phrase_attention=True)
        assert_close_for(step.log_probs, full_log_probs[:, t], ops=TINY_MODEL_OPS)
        assert_close_for(step.attention, full.attention[:, t], ops=TINY_MODEL_OPS)
        assert_close_for(step.phrase_attention, full.phrase_attention[:, t], ops=TINY_MODEL_OPS)
        plain = model.decode_step(tgt_in[:, t], state)
        assert torch.equal(plain.log_probs, step.log_probs) and torch.equal(plain.attention, step.attention)
        assert plain.phrase_attention is None
        assert plain.state.tensors.keys() == step.state.tensors.keys()
        state = step.state
    # Every state tensor is batch-first, so reordering the beam is an index_select.
    assert all(t.shape[0] == src.shape[0] for t in state.tensors.values())
    return state


def assert_padding_changes_nothing(model, src, tgt_in, rows=(1, 2)):
    """Each padded row of the batch (src, tgt_in), run alone without its padding, gives the same
    logits and attention, and the batch puts no attention on padding. Returns the batched output
    and per row (row, source length, target length, output alone), for family-specific checks."""
    batched = model(src, tgt_in, need_attention=True)
    alone_rows = []
    for row in rows:
        length = int(src[row].ne(0).sum())
        t_len = int(tgt_in[row].ne(0).sum())
        alone = model(src[row : row + 1, :length], tgt_in[row : row + 1, :t_len], need_attention=True)
        assert_close_for(batched.logits[row : row + 1, :t_len], alone.logits, ops=TINY_MODEL_OPS)
        assert_close_for(batched.attention[row : row + 1, :t_len, :length], alone.attention, ops=TINY_MODEL_OPS)
        assert batched.attention[row, :, length:].abs().max().item() == 0.0
        alone_rows.append((row, length, t_len, alone))
    return batched, alone_rows


def float32_of(value: Fraction) -> Fraction:
    """`value` rounded to the nearest float32, ties to even (exactly: no double rounding)."""
    if value == 0:
        return Fraction(0)
    exponent = math.frexp(float(value))[1]  # |value| < 2**exponent, near enough to pick the scale
    while abs(value) >= Fraction(2) ** exponent:
        exponent += 1
    while abs(value) < Fraction(2) ** (exponent - 1):
        exponent -= 1
    unit = Fraction(2) ** (exponent - 24)
    return round(value / unit) * unit  # Fraction.__round__ rounds half to even


def float_linear_by_hand(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """decoding.c's float_linear without bias, exactly: each output a chain of float32 FMAs over
    the inputs in order from 0; when rows % 4 == 1 the last row as four chains over the inputs
    d % 4 == 0, 1, 2, 3 (what k % 4 leaves over joins the first), summed (0 + 1) + (2 + 3)."""
    rows, k = x.shape
    xs = [[Fraction(v) for v in row] for row in x.tolist()]
    ws = [[Fraction(v) for v in row] for row in weight.tolist()]
    out = torch.empty(rows, weight.shape[0])
    for i in range(rows):
        alone = rows % 4 == 1 and i == rows - 1
        for j, w in enumerate(ws):
            parts = [Fraction(0)] * 4
            for d in range(k):
                chain = d % 4 if alone and d < k - k % 4 else 0
                parts[chain] = float32_of(xs[i][d] * w[d] + parts[chain])
            total = float32_of(float32_of(parts[0] + parts[1]) + float32_of(parts[2] + parts[3])) if alone else parts[0]
            out[i, j] = float(total)
    return out


def float_linear_outputs_in_stated_order(lib, rows: int):
    """decoding.c's float_linear from `lib` (a loaded kernels library) on a layer of 37 outputs
    (a pair of blocks and a partial block) and 26 inputs (two left over from the interleaved sums),
    `rows` rows, with and without bias and ReLU; asserts each output is exactly
    `float_linear_by_hand`'s. Returns x, weight, bias and the outputs by (with_bias, relu)."""
    from model.decoding.kernel_backend import pack_float

    generator = torch.Generator().manual_seed(rows)
    weight, bias = torch.randn(37, 26, generator=generator), torch.randn(37, generator=generator)
    x = torch.randn(rows, 26, generator=generator)
    packed, sums = pack_float(weight), float_linear_by_hand(x, weight)
    outputs = {}
    for with_bias in (False, True):
        for relu in (0, 1):
            out = torch.full((rows, 37), float("nan"))
            lib.phrasal_float_linear(x.data_ptr(), rows, 26, packed.data_ptr(),
                                     bias.data_ptr() if with_bias else None, 37, relu, out.data_ptr())
            want = sums + bias if with_bias else sums  # one float32 add, as the kernel
            assert torch.equal(out, want.clamp(min=0) if relu else want), f"bias={with_bias} relu={relu}"
            outputs[with_bias, relu] = out
    return x, weight, bias, outputs
