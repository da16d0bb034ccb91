"""The local fertility bias (Cohn et al. §3.3): how much source positions near i were attended so far.

A source word translated already should be attended less (or, for a word that yields several
target words, more): the logit of source position i gets Σ_o w[h, o] · c_t[i+o] for o in -k..k
(option "window", default 1), the paper's ξ₂(Σ_{t'<t} α_{t'}; i), c_t = Σ_{t'<t} α_{t'} the
attention summed over all earlier target steps (zeros at t = 0). With "form": "recurrent" (the
paper's) α is the attention the layer actually used, itself biased; with "form": "parallel" it
is the layer's unbiased attention (`model.biases.window_bias` says why both exist).
"""
from __future__ import annotations

from model.biases.registry import register_bias
from model.biases.window_bias import WindowBias


@register_bias("fertility")
class FertilityBias(WindowBias):
    name = "fertility"
    reads = "coverage"
