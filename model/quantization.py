"""Int8 quantisation of a Transformer's linear layers, for CPU decoding.

`quantize_int8` replaces `nn.Linear` layers by `Int8Linear` (model/int8_linear.py):
weights int8 per output channel, each input row quantised on the fly with its own scale, so the
projections run as int8 GEMMs (decoding.c) while LayerNorm, softmax and attention stay float32.
Which linear layers: those of the vanilla attention sites, the feed-forward blocks and the output
projection (`QUANTISED_PARENTS`); a family's own layers whose weights it reads directly stay
float32. Because a row's scale is its own, an int8 translation does not depend on the other texts
of its batch, and an incremental step gives the int8 full pass's rows up to the float rounding of
the float32 parts. The output projection is the largest GEMM of a decoding step (vocabulary x
d_model per hypothesis; on the bundled en-de about a quarter of a step's CPU time in fp32); with
tied embeddings it is `F.linear(x, embedding.weight)`, not a module, so the quantised copy gets
its own quantised `output_projection` holding the same weights (the embedding lookup keeps the
float32 table). `Transformer._logits` uses `output_projection` whenever it is set, so the copy
computes the same function up to rounding.

Quantisation changes the numbers, so it is verified before it is served (export/int8_check.py);
the float32 model is never modified.
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from model.attention.vanilla import VanillaAttention
from model.int8_linear import Int8Linear
from model.layers import FeedForward
from model.transformer import Transformer

INT8 = "int8"


# The modules whose linear layers are only ever called (never read as weights): a quantised
# linear has no `.weight` tensor, and the phrasal attentions (fused n-gram convolutions), phrase
# representations and alignment biases read their layers' weights directly, so those stay float32.
QUANTISED_PARENTS = (VanillaAttention, FeedForward)


def quantised_linears(model: nn.Module) -> set[str]:
    """Names of the nn.Linear modules `quantize_int8` quantises: those of QUANTISED_PARENTS, and
    the output projection."""
    names = {"output_projection"} if isinstance(getattr(model, "output_projection", None), nn.Linear) else set()
    for parent_name, parent in model.named_modules():
        if type(parent) in QUANTISED_PARENTS:
            names |= {f"{parent_name}.{name}" for name, child in parent.named_children() if type(child) is nn.Linear}
    return names


def quantize_int8(model: Transformer, output_projection: bool = True) -> Transformer:
    """A float32 CPU copy of `model` with the linear layers of its vanilla attention sites and
    feed-forward blocks (and with `output_projection`, the output projection) int8 quantised
    (`Int8Linear`); `model` itself is left as it was."""
    quantised = copy.deepcopy(model).to(device="cpu", dtype=torch.float32).eval()
    if output_projection and quantised.output_projection is None:  # tied: the logits read the embedding table
        table = quantised.source_embedding.tokens.weight  # (V, D)
        quantised.output_projection = Int8Linear.quantize(table, None)
    names = quantised_linears(quantised)
    if not output_projection:
        names.discard("output_projection")
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = quantised.get_submodule(parent_name) if parent_name else quantised
        linear = getattr(parent, child)
        setattr(parent, child, Int8Linear.quantize(linear.weight, linear.bias))
    return quantised
