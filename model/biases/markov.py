"""The Markov bias (Cohn et al. §3.2): the previous target step's attention near source position i.

A word's alignment tends to follow the previous word's (monotone, or a short jump): the logit of
source position i gets Σ_o w[h, o] · α_{t-1}[i+o] for o in -k..k (option "window", default 1),
α_{t-1} being the same layer's unbiased attention at the previous target step (zeros at t = 0).
"""
from __future__ import annotations

from model.biases.registry import register_bias
from model.biases.window_bias import WindowBias


@register_bias("markov")
class MarkovBias(WindowBias):
    name = "markov"
    reads = "previous"
