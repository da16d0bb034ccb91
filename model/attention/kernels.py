"""Which fused attention kernels PyTorch may pick for this process.

cuDNN's fused attention (one of the CUDA backends of ``F.scaled_dot_product_attention``) builds
an execution plan the first time it sees each new combination of shapes. Serving and training
see new shapes all the time: every batch size, source length and decoding step is one. On the
H100 device (torch 2.11, CUDA 13) that made the first pass over 40 mixed batches of the bundled
model take 30.6 s against 3.5 s once the plans were cached, and 3.6 s with cuDNN attention off
(`benchmarks/decode_speed.py --mixed-batches 40 --cudnn-attention on|off`, results/decode_cuda.md). The flash, memory-efficient and math
kernels have no per-shape set-up, so cuDNN's is switched off wherever our models run on CUDA.
"""
from __future__ import annotations

import torch


def avoid_per_shape_attention_plans(device: torch.device) -> None:
    """On CUDA, take cuDNN out of the kernels scaled_dot_product_attention chooses from (process-wide)."""
    if device.type == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(False)
