"""What the profiling benchmarks (training_step_profile.py, decode_step_profile.py) share: the device
they run on, and which events of a torch.profiler trace are the GPU's kernels."""
from __future__ import annotations

import argparse


def open_device(parser: argparse.ArgumentParser, name: str):
    """The torch device `name`, set up as the model code expects (attention without per-shape plans);
    a CUDA device where there is none is refused in the parser's one line."""
    import torch

    from model.attention.kernels import avoid_per_shape_attention_plans

    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device: CUDA is not available here")
    avoid_per_shape_attention_plans(device)
    return device


def kernel_events(events, annotations: tuple[str, ...] = ()) -> list:
    """The kernels' own events of `prof.key_averages()`: those on the GPU (the operators that launch
    them count their device time again), less the `record_function` annotations whose names start
    with one of `annotations`, which a CUDA trace also shows on the GPU spanning what they enclose."""
    from torch.autograd import DeviceType

    return [e for e in events if getattr(e, "device_type", None) == DeviceType.CUDA
            and not e.key.startswith(annotations)]
