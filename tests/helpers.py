"""Tiny models built inside the tests: no network, no big files."""
from __future__ import annotations

import torch

from model.config import ModelConfig
from model.transformer import Transformer


def tiny_config(**overrides) -> ModelConfig:
    values = dict(vocab_size=500, d_model=32, n_heads=4, d_ff=64, encoder_layers=2, decoder_layers=2,
                  dropout=0.0, max_positions=128)
    values.update(overrides)
    return ModelConfig(**values)


def tiny_model(seed: int = 0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(tiny_config(**overrides)).eval()
