"""ONNX int8: ONNX Runtime's dynamic quantisation of the float32 graphs (CPU).

`onnxruntime.quantization.quantize_dynamic` stores the weights of every MatMul (and Gemm) as
int8 and quantises their activations at run time (MatMulInteger / DynamicQuantizeLinear), the
graph counterpart of model/quantization.py. Per-channel weights keep the tied output projection
(vocabulary rows of very different norms) closer to float32 than one scale per tensor.
The graphs run on the CPU execution provider; they are verified against eager float32 by BLEU,
as quantised CTranslate2 exports are (export/verify.py).
"""
from __future__ import annotations

import logging
from pathlib import Path


def quantize_graphs_int8(out_dir: Path, files: list[str]) -> dict[str, str]:
    """Replace each float32 graph in out_dir by its dynamically quantised int8 version."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # "consider pre-processing" advice on every call
    try:
        for name in files:
            source = out_dir / name
            staged = out_dir / f"{name}.float32"
            source.rename(staged)
            quantize_dynamic(str(staged), str(source), weight_type=QuantType.QInt8, per_channel=True)
            staged.unlink()
    finally:
        root.setLevel(level)
    return {"quantization": "onnxruntime quantize_dynamic, QInt8 weights, per channel"}
