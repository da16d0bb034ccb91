"""ONNX translations that replace the exporter's default where that default is not deterministic.

`Tensor.index_add` (QueryK adds every kernel row's partial score into its n-gram with one
index_add over repeated indices: model/attention/queryk.py) is lowered by torch.onnx to
`index_put(accumulate=True)`, i.e. ScatterND with reduction "add". ONNX Runtime's CPU kernel
for it runs the updates in parallel without guarding repeated indices, so with two or more
intra-op threads the sums race (onnxruntime issues #18048, #23396): the same QueryK encoder
graph gave attention keys off by up to 0.24 on two runs in six over a 32-sentence batch, while
one thread was exact. Keeping index_add and lowering it to ScatterElements(reduction="add")
instead gives the same sums in a fixed order (bitwise equal to torch on CPU in our checks,
run after run). The sum runs in float32 whatever the graph's dtype: ONNX Runtime's CPU
ScatterElements has no float16 kernel with reduction "add" (a float16 QueryK export failed to run
at all), and float32 partial sums are what the eager float16 model accumulates anyway.
`TRANSLATIONS` is passed to torch.onnx.export as its custom_translation_table; ops named there
are not decomposed first.
"""
from __future__ import annotations

import torch
from onnx import TensorProto
from onnxscript import opset18 as op

FLOAT = TensorProto.FLOAT


def index_add(self, dim: int, index, source, alpha: float = 1.0):
    """out = self; out[..., index[l], ...] += alpha * source[..., l, ...] along `dim`.

    ScatterElements wants one index per source element: index (L,) is reshaped to broadcast
    along `dim` and expanded to source's shape.
    """
    rank = len(source.shape)
    axis = dim % rank
    shape = [1] * rank
    shape[axis] = -1
    indices = op.Expand(op.Reshape(index, op.Constant(value_ints=shape)), op.Shape(source))  # source's shape
    if alpha != 1:
        source = op.Mul(source, op.CastLike(op.Constant(value_float=float(alpha)), source))
    summed = op.ScatterElements(op.Cast(self, to=FLOAT), indices, op.Cast(source, to=FLOAT), axis=axis, reduction="add")
    return op.CastLike(summed, self)


TRANSLATIONS = {torch.ops.aten.index_add.default: index_add}
