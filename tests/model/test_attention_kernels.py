"""cuDNN attention is switched off wherever our models run on CUDA (model/attention/kernels.py)."""
from __future__ import annotations

import pytest
import torch

from model.attention.kernels import avoid_per_shape_attention_plans


@pytest.fixture
def cudnn_attention_on():
    before = torch.backends.cuda.cudnn_sdp_enabled()
    torch.backends.cuda.enable_cudnn_sdp(True)
    yield
    torch.backends.cuda.enable_cudnn_sdp(before)


def test_cuda_turns_cudnn_attention_off_and_cpu_leaves_it(cudnn_attention_on):
    avoid_per_shape_attention_plans(torch.device("cpu"))
    assert torch.backends.cuda.cudnn_sdp_enabled()
    avoid_per_shape_attention_plans(torch.device("cuda", 0))
    assert not torch.backends.cuda.cudnn_sdp_enabled()


@pytest.mark.parametrize("resolve", ["service", "training"])
def test_resolving_a_cuda_device_turns_cudnn_attention_off(resolve, cudnn_attention_on, monkeypatch):
    # The service's and the trainer's device resolution are where CUDA work starts.
    from service.runtime.torch_runtime import resolve_device as service_resolve
    from training.loop import resolve_device as training_resolve

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    device = (service_resolve if resolve == "service" else training_resolve)("auto")
    assert device == torch.device("cuda")
    assert not torch.backends.cuda.cudnn_sdp_enabled()
