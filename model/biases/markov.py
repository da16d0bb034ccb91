"""The Markov bias (Cohn et al. §3.2): the previous target step's attention near source position i.

A word's alignment tends to follow the previous word's (monotone, or a short jump): the logit of
source position i gets Σ_o w[h, o] · α_{t-1}[i+o] for o in -k..k (option "window", default 1),
the paper's ξ₁(α_{t-1}; i). With "form": "recurrent" (the paper's) α_{t-1} is the attention the
layer actually used at step t-1, itself biased; with "form": "parallel" it is the layer's
unbiased attention at t-1 (`model.biases.window_bias` says why both exist). Zeros at t = 0.
"""
from __future__ import annotations

from model.biases.registry import register_bias
from model.biases.window_bias import WindowBias


@register_bias("markov")
class MarkovBias(WindowBias):
    name = "markov"
    reads = "previous"
