"""CTranslate2 build: the vanilla pre-norm Transformer filled into CTranslate2's TransformerSpec.

The mapping (read from CTranslate2's spec classes and its fairseq / OpenNMT-py converters):
pre-norm encoder and decoder with a final LayerNorm each, ReLU feed-forward, embeddings scaled by
√d_model (`scale_embeddings = True`), and our interleaved sinusoid table given explicitly as
`position_encodings.encodings` (CTranslate2's built-in sinusoid puts sin and cos in halves, which
is not ours); positions start at 0 on both sides, as ours. Self-attention Q, K, V projections are
fused into one linear (rows stacked q, k, v), cross-attention K and V into another. LayerNorm
epsilon is torch's 1e-5. The output projection is the shared embedding (or ours when untied).

Special tokens: the vocabulary is the SentencePiece pieces in id order, so CTranslate2's ids are
ours; source = pieces + EOS via `add_source_eos`, the decoder starts from BOS (id 1), and stops
at EOS (id 2). Alignments: `alignment_layer` is our config's and `alignment_heads = 0` averages
every head, as `Transformer.decode_step` does.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from model.embedding import sinusoidal_table
from model.text.tokenizer import Tokenizer
from model.transformer import Transformer

QUANTIZATIONS = ("float32", "float16", "bfloat16", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16")
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's default, which model/layers.py uses


def _np(t: torch.Tensor) -> np.ndarray:
    # A copy: CTranslate2 quantises spec arrays in place, and a float32 CPU tensor's .numpy()
    # shares memory with the model (which verification then uses as the eager reference).
    return t.detach().float().cpu().numpy().copy()


def _linear(spec, linear: torch.nn.Linear) -> None:
    spec.weight = _np(linear.weight)
    if linear.bias is not None:
        spec.bias = _np(linear.bias)


def _fused(spec, linears: list[torch.nn.Linear]) -> None:
    spec.weight = np.concatenate([_np(m.weight) for m in linears], axis=0)  # (k*D, D)
    spec.bias = np.concatenate([_np(m.bias) for m in linears], axis=0)  # (k*D,)


def _norm(spec, norm: torch.nn.LayerNorm) -> None:
    spec.gamma = _np(norm.weight)
    spec.beta = _np(norm.bias)


def _self_attention(spec, norm, attention) -> None:
    _norm(spec.layer_norm, norm)
    _fused(spec.linear[0], [attention.q_proj, attention.k_proj, attention.v_proj])
    _linear(spec.linear[1], attention.out_proj)


def _cross_attention(spec, norm, attention) -> None:
    _norm(spec.layer_norm, norm)
    _linear(spec.linear[0], attention.q_proj)
    _fused(spec.linear[1], [attention.k_proj, attention.v_proj])
    _linear(spec.linear[2], attention.out_proj)


def _ffn(spec, norm, ffn) -> None:
    _norm(spec.layer_norm, norm)
    _linear(spec.linear_0, ffn.up)
    _linear(spec.linear_1, ffn.down)


def vocabulary(tokenizer: Tokenizer) -> list[str]:
    return [tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size)]


def build_spec(model: Transformer, tokenizer: Tokenizer):
    """A validated-ready ctranslate2 TransformerSpec holding `model`'s weights in float32."""
    from ctranslate2.specs import common_spec, transformer_spec

    c = model.config
    encoder = transformer_spec.TransformerEncoderSpec(c.encoder_layers, c.n_heads, pre_norm=True, activation=common_spec.Activation.RELU)
    decoder = transformer_spec.TransformerDecoderSpec(
        c.decoder_layers, c.n_heads, pre_norm=True, activation=common_spec.Activation.RELU,
        alignment_layer=c.alignment_layer_index, alignment_heads=0,
    )
    table = sinusoidal_table(c.max_positions, c.d_model).numpy()  # (P, D)
    encoder.embeddings[0].weight = _np(model.source_embedding.tokens.weight)
    encoder.scale_embeddings = True
    encoder.position_encodings.encodings = table
    _norm(encoder.layer_norm, model.encoder_norm)
    for spec, layer in zip(encoder.layer, model.encoder_layers):
        _self_attention(spec.self_attention, layer.self_norm, layer.self_attention)
        _ffn(spec.ffn, layer.ffn_norm, layer.ffn)
    decoder.embeddings.weight = _np(model.target_embedding.tokens.weight)
    decoder.scale_embeddings = True
    decoder.position_encodings.encodings = table
    _norm(decoder.layer_norm, model.decoder_norm)
    for spec, layer in zip(decoder.layer, model.decoder_layers):
        _self_attention(spec.self_attention, layer.self_norm, layer.self_attention)
        _cross_attention(spec.attention, layer.cross_norm, layer.cross_attention)
        _ffn(spec.ffn, layer.ffn_norm, layer.ffn)
    output = model.source_embedding.tokens.weight if model.output_projection is None else model.output_projection.weight
    decoder.projection.weight = _np(output)

    spec = transformer_spec.TransformerSpec(encoder, decoder)
    pieces = vocabulary(tokenizer)
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    spec.config.unk_token = pieces[tokenizer.unk_id]
    spec.config.bos_token = pieces[c.bos_id]
    spec.config.eos_token = pieces[c.eos_id]
    spec.config.decoder_start_token = pieces[c.bos_id]
    spec.config.add_source_bos = False
    spec.config.add_source_eos = True
    spec.config.layer_norm_epsilon = LAYER_NORM_EPSILON
    return spec


def build_ct2(model: Transformer, tokenizer: Tokenizer, out_dir: Path, quantization: str) -> dict[str, Any]:
    """Write model.bin, config.json and shared_vocabulary.json into `out_dir`."""
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization must be one of {', '.join(QUANTIZATIONS)}, got {quantization!r}")
    spec = build_spec(model, tokenizer)
    spec.validate()
    spec.optimize(quantization=quantization)
    spec.save(str(out_dir))
    return {"files": sorted(p.name for p in out_dir.iterdir()), "spec": "TransformerSpec", "spec_revision": spec.revision}
