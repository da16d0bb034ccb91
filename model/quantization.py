"""Int8 dynamic quantisation of a Transformer's linear layers, for CPU decoding.

`torch.ao.quantization.quantize_dynamic` stores `nn.Linear` weights as int8 (per-tensor affine)
and quantises each activation on the fly, so the projections run as int8 GEMMs while
LayerNorm, softmax and attention stay float32. Which linear layers: those of the vanilla
attention sites, the feed-forward blocks and the output projection (`QUANTISED_PARENTS`); a
family's own layers whose weights it reads directly stay float32. Activation scales are taken
per call over the whole input tensor, so an int8 translation can depend on the other sentences
of its batch (and incremental decoding does not equal the int8 full pass): one more reason the
int8 path is verified on batched output rather than assumed equal. The output projection is the largest GEMM of a
decoding step (vocabulary x d_model per hypothesis; on the bundled en-de about a quarter of a
step's CPU time in fp32); with tied embeddings it is `F.linear(x, embedding.weight)`, not a
module, so the quantised copy gets its own quantised `output_projection` holding the same
weights (the embedding lookup keeps the float32 table). `Transformer._logits` uses
`output_projection` whenever it is set, so the copy computes the same function up to rounding.

Quantisation changes the numbers, so it is verified before it is served (export/int8_check.py);
the float32 model is never modified.
"""
from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

from model.attention.vanilla import VanillaAttention
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
    feed-forward blocks (and with `output_projection`, the output projection) int8 dynamically
    quantised; `model` itself is left as it was."""
    quantised = copy.deepcopy(model).to(device="cpu", dtype=torch.float32).eval()
    if output_projection and quantised.output_projection is None:  # tied: the logits read the embedding table
        table = quantised.source_embedding.tokens.weight  # (V, D)
        projection = nn.Linear(table.shape[1], table.shape[0], bias=False)
        with torch.no_grad():
            projection.weight.copy_(table)
        quantised.output_projection = projection
    names = quantised_linears(quantised)
    if not output_projection:
        names.discard("output_projection")
    return quantize_dynamic_int8(quantised, names)


def quantize_dynamic_int8(module: nn.Module, names: set[str] | set[type]) -> nn.Module:
    """`torch.ao.quantization.quantize_dynamic` to qint8 of `module`'s linear layers `names`."""
    with warnings.catch_warnings():
        # torch 2.13 deprecates torch.ao.quantization and its quantised tensor types in favour of
        # the separate torchao package, but still ships and runs them (tests/model/test_quantization.py
        # fails the day they go); the warnings would otherwise repeat in every process that loads int8.
        warnings.filterwarnings("ignore", message=r".*quantized tensor creation functions.*", category=UserWarning)
        warnings.filterwarnings("ignore", message=r".*torch\.ao\.quantization is deprecated.*", category=DeprecationWarning)
        return torch.ao.quantization.quantize_dynamic(module, names, dtype=torch.qint8)
