"""The decoding state as exported graphs see it, found by probing the model rather than by name.

`DecoderState.tensors` is a flat dict of batch-first tensors whose keys become the graphs' named
inputs and outputs ("layers.0.self.k" -> "in_layers.0.self.k" / "out_layers.0.self.k"). Which of
their dimensions are dynamic is learned by running the model on probe batches that vary one
thing at a time (batch size, source length, steps decoded): a dimension that follows the source
length is the "src_len" axis, one that grows by one per step is the "past_len" axis (the
self-attention cache), and one that never changes is static (heads, head size, the n-gram window
buffers). Nothing here knows an attention kind by name, so new kinds are exported unchanged.

The probe also asks `decode_step` for the phrase attention (N, n_max, S): when it is
more than the token attention as 1-grams (a phrasal cross-attention's n-gram table, the chunk
table of phrase representations), the step graph outputs it ("output"); when it is exactly the
token attention as 1-grams (every other model), runners rebuild it from the attention ("token").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from model.transformer import Transformer

BATCH = "batch"
SOURCE = "src_len"
PAST = "past_len"
# How an export gives the phrase attention (`StateLayout.phrase_attention`).
PHRASES_OUTPUT = "output"  # the step graph has a "phrase_attention" output (N, phrase_sizes, S)
PHRASES_FROM_TOKENS = "token"  # it is the token attention as 1-grams (N, 1, S): rebuilt by the runner
PHRASES_NONE = "none"  # not available (no attention, or a manifest that does not record it)
INPUT_PREFIX = "in_"
OUTPUT_PREFIX = "out_"

# Probe sizes: distinct and >= 2 (torch.export specialises sizes 0 and 1).
_BATCH, _SOURCE, _STEPS = 2, 5, 3


@dataclass(frozen=True)
class StateLayout:
    """Names, dtypes and dynamic axes of the decoder state, in graph input/output order."""

    names: tuple[str, ...]
    dtypes: dict[str, str]  # "float32", "bool", ... (torch dtype names without "torch.")
    axes: dict[str, dict[int, str]]  # per tensor: dimension -> axis name; other dimensions are static
    shapes: dict[str, list[int | str]]  # per tensor: static size or axis name, for the manifest
    has_attention: bool  # decode_step returns cross-attention rows (needed for alignments)
    phrase_attention: str = PHRASES_NONE  # PHRASES_OUTPUT | PHRASES_FROM_TOKENS | PHRASES_NONE
    phrase_sizes: int = 0  # n_max of the phrase attention output (PHRASES_OUTPUT only)
    # The per-sentence tensors (`DecoderState.sentence`): a step passes them through unchanged,
    # so runners keep their own and reorder them by sentence (none: a manifest that lists none).
    sentence: tuple[str, ...] = ()

    def input_names(self) -> list[str]:
        return [INPUT_PREFIX + name for name in self.names]

    def output_names(self) -> list[str]:
        return [OUTPUT_PREFIX + name for name in self.names]

    def to_dict(self) -> dict[str, Any]:
        return {
            "names": list(self.names),
            "dtypes": dict(self.dtypes),
            "axes": {name: {str(d): axis for d, axis in dims.items()} for name, dims in self.axes.items()},
            "shapes": {name: list(shape) for name, shape in self.shapes.items()},
            "has_attention": self.has_attention,
            "phrase_attention": self.phrase_attention,
            "phrase_sizes": self.phrase_sizes,
            "sentence": list(self.sentence),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "StateLayout":
        return cls(
            names=tuple(data["names"]),
            dtypes=dict(data["dtypes"]),
            axes={name: {int(d): axis for d, axis in dims.items()} for name, dims in data["axes"].items()},
            shapes={name: list(shape) for name, shape in data["shapes"].items()},
            has_attention=bool(data["has_attention"]),
            phrase_attention=str(data.get("phrase_attention", PHRASES_NONE)),
            phrase_sizes=int(data.get("phrase_sizes", 0)),
            sentence=tuple(data.get("sentence", ())),
        )


def _filler_id(model: Transformer) -> int:
    c = model.config
    special = {c.pad_id, c.bos_id, c.eos_id}
    return next(i for i in range(c.vocab_size) if i not in special)


def probe_source(model: Transformer, batch: int, length: int) -> torch.Tensor:
    """(batch, length) ids ending in EOS, on the model's device; the second row is two tokens
    shorter (padding exercised)."""
    c = model.config
    src = torch.full((batch, length), _filler_id(model), dtype=torch.long, device=next(model.parameters()).device)
    src[:, -1] = c.eos_id
    if batch > 1 and length > 2:
        src[1, -3] = c.eos_id
        src[1, -2:] = c.pad_id
    return src


@torch.inference_mode()
def run_probe(model: Transformer, batch: int, length: int, steps: int) -> tuple[list[dict[str, torch.Tensor]], bool, frozenset[str]]:
    """The state before the first step and after each of `steps` steps; whether attention came
    back; the per-sentence names."""
    src = probe_source(model, batch, length)
    state = model.init_state(model.encode(src))
    sentence = state.sentence
    states = [dict(state.tensors)]
    tokens = torch.full((batch,), model.config.bos_id, dtype=torch.long, device=src.device)
    has_attention = True
    for _ in range(steps):
        out = model.decode_step(tokens, state)
        state = out.state
        has_attention = has_attention and out.attention is not None
        states.append(dict(state.tensors))
        tokens = torch.full((batch,), _filler_id(model), dtype=torch.long, device=src.device)
    return states, has_attention, sentence


@torch.inference_mode()
def probe_phrases(model: Transformer, has_attention: bool) -> tuple[str, int, list[str]]:
    """(phrase_attention mode, phrase_sizes, problems): what `decode_step(..., need_phrase_attention=True)`
    gives over a few steps of the probe batch, compared with the token attention of the same steps."""
    if not has_attention:
        return PHRASES_NONE, 0, []
    src = probe_source(model, _BATCH, _SOURCE)
    state = model.init_state(model.encode(src))
    tokens = torch.full((_BATCH,), model.config.bos_id, dtype=torch.long, device=src.device)
    shapes, as_tokens = set(), True
    for _ in range(_STEPS):
        out = model.decode_step(tokens, state, need_phrase_attention=True)
        phrases, state = out.phrase_attention, out.state
        shapes.add(tuple(phrases.shape))
        as_tokens = as_tokens and phrases.shape[1] == 1 and torch.equal(phrases[:, 0], out.attention)
        tokens = torch.full((_BATCH,), _filler_id(model), dtype=torch.long, device=src.device)
    if shapes != {(_BATCH, next(iter(shapes))[1], _SOURCE)}:
        return PHRASES_NONE, 0, [
            f"the phrase attention of decode_step must be (N, n_max, S) with a fixed n_max, got shapes {sorted(shapes)}"
        ]
    if as_tokens:
        return PHRASES_FROM_TOKENS, 0, []
    return PHRASES_OUTPUT, next(iter(shapes))[1], []


def probe_layout(model: Transformer) -> tuple[StateLayout | None, list[str]]:
    """The state layout of `model`, or None and every reason it cannot be exported as graphs."""
    try:
        base, has_attention, sentence = run_probe(model, _BATCH, _SOURCE, _STEPS)
        wider, _, _ = run_probe(model, _BATCH + 1, _SOURCE, 2)
        longer, _, _ = run_probe(model, _BATCH, _SOURCE + 2, 2)
    except Exception as error:  # the model's own code: report it, whatever it is
        return None, [
            "incremental decoding fails on the export probe (decode_step must read everything it needs "
            f"from the decoder state): {type(error).__name__}: {error}"
        ]
    problems: list[str] = []
    names = list(base[0])
    for state in base[1:] + wider + longer:
        if list(state) != names:
            problems.append(f"the decoder state's tensor names change between steps: {names} vs {list(state)}")
            break
    if problems:
        return None, problems

    batch_sig = (_BATCH, _BATCH, _BATCH, _BATCH + 1, _BATCH)
    source_sig = (_SOURCE, _SOURCE, _SOURCE, _SOURCE, _SOURCE + 2)
    past_sig = (0, 2, 3, 2, 2)
    dtypes: dict[str, str] = {}
    axes: dict[str, dict[int, str]] = {}
    shapes: dict[str, list[int | str]] = {}
    for name in names:
        views = [base[0][name], base[2][name], base[3][name], wider[2][name], longer[2][name]]
        dtype_set = {str(t.dtype).removeprefix("torch.") for t in views}
        if len(dtype_set) != 1:
            problems.append(f"decoder state tensor {name!r} changes dtype between steps: {sorted(dtype_set)}")
        ranks = {t.dim() for t in views}
        if len(ranks) != 1 or 0 in ranks:
            problems.append(f"decoder state tensor {name!r} must keep one rank >= 1, got ranks {sorted(ranks)}")
            continue
        dtypes[name] = dtype_set.pop() if len(dtype_set) == 1 else "mixed"
        axes[name] = {}
        shapes[name] = []
        for d in range(views[0].dim()):
            sig = tuple(int(t.shape[d]) for t in views)
            if d == 0:
                if sig != batch_sig:
                    problems.append(f"decoder state tensor {name!r} is not batch-first (dimension 0 sizes {sig} on probes of batch sizes {batch_sig})")
                axes[name][0] = BATCH
                shapes[name].append(BATCH)
            elif sig[3] != sig[1]:
                problems.append(f"decoder state tensor {name!r}: dimension {d} depends on the batch size; only dimension 0 may")
            elif sig == source_sig:
                axes[name][d] = SOURCE
                shapes[name].append(SOURCE)
            elif sig == past_sig:
                axes[name][d] = PAST
                shapes[name].append(PAST)
            elif len(set(sig)) == 1:
                shapes[name].append(sig[0])  # static: heads, head size, n-gram window rows
            else:
                problems.append(
                    f"decoder state tensor {name!r}: dimension {d} varies as {sig} on the probes; exported graphs "
                    "support only static sizes, the source length, or one row per decoded step"
                )
    try:
        phrase_mode, phrase_sizes, phrase_problems = probe_phrases(model, has_attention)
    except Exception as error:  # the model's own code: report it, whatever it is
        phrase_mode, phrase_sizes, phrase_problems = PHRASES_NONE, 0, [
            f"decode_step with phrases fails on the export probe: {type(error).__name__}: {error}"
        ]
    problems += phrase_problems
    if problems:
        return None, problems
    shared = tuple(name for name in names if name in sentence)
    for name in shared:
        if not all(torch.equal(state[name], base[0][name]) for state in base[1:]):
            problems.append(f"decoder state tensor {name!r} is declared per sentence but a step changes it")
    if problems:
        return None, problems
    return StateLayout(tuple(names), dtypes, axes, shapes, has_attention, phrase_mode, phrase_sizes, shared), []
