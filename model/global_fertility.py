"""The global fertility of Cohn et al. (2016, "Fertility", global fertility): options and the head.

A source token's fertility is the attention it receives summed over the target, fᵢ = Σₜ αₜᵢ.
The head predicts, from each source encoding eᵢ (the encoder output), a Gaussian N(μᵢ, σ²ᵢ) over
that fertility; training adds weight · −log N(fᵢ; μᵢ, σ²ᵢ) to the objective
(`training.losses.global_fertility_loss`, `training.losses.global_fertility_term`). The head only
shapes training: decoding never reads it.

Options (`ModelConfig.global_fertility`, None = off):
    weight        required, a number >= 0: the loss coefficient.
    reduction     how the per-position terms are added up against the token cross-entropy:
                  "sum" (Cohn et al. §3.3, the paper's): −Σᵢ log N(fᵢ) summed over the source positions
                    of the batch, added to the summed token log-likelihood; as the trainer divides the
                    token term by the target tokens, the sum is divided by them too. weight 1 is the
                    paper's objective.
                  "mean" (absent = "mean", the form configs had before the option existed): weight ·
                    the mean of −log N(fᵢ) over the source positions, whatever the sentence lengths.
                  "mean" with weight w equals "sum" with weight w · N_tgt / N_src (per batch).
    layer         which decoder layer's cross-attention gives α (default -1 = the last).
    head          null (default): α is that layer's heads averaged; an integer h: head h alone.
    min_variance  a number > 0 (default 0.01): the floor added to σ², so that −log N stays bounded.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

DEFAULTS: dict[str, Any] = {"layer": -1, "head": None, "min_variance": 0.01, "reduction": "mean"}
KNOWN = ("head", "layer", "min_variance", "reduction", "weight")
REDUCTIONS = ("mean", "sum")
PREFIX = "global_fertility"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def validate_global_fertility(options: Any, config: Any) -> list[str]:
    """Every problem of the options at once (the core config is already known to be sound)."""
    if not isinstance(options, Mapping):
        return [f"{PREFIX} must be an object or null, got {type(options).__name__}"]
    problems: list[str] = []
    unknown = sorted(set(options) - set(KNOWN))
    if unknown:
        problems.append(f"{PREFIX}: unknown option(s) {unknown}; known options: {', '.join(KNOWN)}")
    if "weight" not in options:
        problems.append(f"{PREFIX}: option 'weight' is required (the loss coefficient, a number >= 0)")
    elif not _is_number(options["weight"]) or options["weight"] < 0:
        problems.append(f"{PREFIX}: weight must be a number >= 0, got {options['weight']!r}")
    layers = config.decoder_layers
    layer = options.get("layer", DEFAULTS["layer"])
    if not _is_int(layer) or not -layers <= layer < layers:
        problems.append(f"{PREFIX}: layer must index a decoder layer in [-{layers}, {layers}), got {layer!r}")
    head = options.get("head", DEFAULTS["head"])
    if head is not None and (not _is_int(head) or not 0 <= head < config.n_heads):
        problems.append(f"{PREFIX}: head must be null (heads averaged) or a head index in [0, {config.n_heads}), "
                        f"got {head!r}")
    floor = options.get("min_variance", DEFAULTS["min_variance"])
    if not _is_number(floor) or floor <= 0:
        problems.append(f"{PREFIX}: min_variance must be a number > 0, got {floor!r}")
    reduction = options.get("reduction", DEFAULTS["reduction"])
    if reduction not in REDUCTIONS:
        problems.append(f"{PREFIX}: reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}")
    return problems


def fertility_options(config: Any) -> dict[str, Any]:
    """The options of a validated config with the defaults filled in."""
    return {**DEFAULTS, **dict(config.global_fertility)}


class GlobalFertility(nn.Module):
    """μᵢ = softplus(w_μ·hᵢ + b_μ), σ²ᵢ = softplus(w_σ·hᵢ + b_σ) + min_variance, hᵢ = relu(W eᵢ + b)."""

    def __init__(self, config: Any):
        super().__init__()
        options = fertility_options(config)
        self.loss_weight = float(options["weight"])
        self.layer_index = options["layer"] % config.decoder_layers
        self.head: int | None = options["head"]
        self.min_variance = float(options["min_variance"])
        self.reduction: str = options["reduction"]
        self.hidden = nn.Linear(config.d_model, config.d_model)
        self.out = nn.Linear(config.d_model, 2)

    def forward(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Encoder states (B, S, D) -> mean (B, S), variance (B, S), float32 and positive."""
        raw = self.out(F.relu(self.hidden(states))).float()  # (B, S, 2)
        mean, variance = raw.unbind(dim=-1)  # (B, S) each
        return F.softplus(mean), F.softplus(variance) + self.min_variance

    def select(self, probs: torch.Tensor) -> torch.Tensor:
        """The configured layer's cross-attention (B, H, T, S) -> α (B, T, S): heads averaged, or one head."""
        if self.head is None:
            return probs.mean(dim=1)  # (B, T, S)
        return probs[:, self.head]  # (B, T, S)
