"""The modules of the attentive source-phrase representations (Xu et al., 2020); the math lives
in model/phrase_representation/functional.py, and the options in model/phrase_representation/options.py.

- `AttentivePooling`: one vector per fixed chunk of a layer's token states (§3.1, eq. 1-4).
  The encoder owns encoder_layers + 1 of them: the embeddings and every layer's output.
- `PhraseCombination`: the encoder sublayer that merges phrases into the token stream (§3.2):
  tokens cross-attend to the previous layer's phrases, then a 2-layer MLP over [token; context].
- `PhraseCrossAttention`: the decoder sublayer before the token cross-attention: a learned
  softmax mix over the encoder's phrase representations (transparent attention), then
  cross-attention to it. Its keys and values are projected once per source (`init_state`).

Every sublayer is pre-norm (LayerNorm on its input) and returns the update that its layer adds
to the residual stream through dropout, like every other sublayer of this Transformer.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from model.attention.contract import AttentionOut
from model.attention.functional import dropout
from model.attention.vanilla import VanillaAttention
from model.phrase_representation.functional import attentive_pool, transparent_mix, transparent_weights
from model.phrase_representation.options import phrase_options

State = dict[str, torch.Tensor]


class AttentivePooling(nn.Module):
    """Pools a (normalised) token stream into one vector per chunk: W₁ = [token | glance], W₂."""

    def __init__(self, d_model: int, glance: str):
        super().__init__()
        self.glance = glance
        self.norm = nn.LayerNorm(d_model)
        self.token_hidden = nn.Linear(d_model, d_model)  # W₁'s token half and b₁
        self.glance_hidden = nn.Linear(d_model, d_model, bias=False)  # W₁'s glance half
        self.score = nn.Linear(d_model, 1, bias=False)  # W₂

    def forward(self, x: torch.Tensor, chunks: torch.Tensor) -> torch.Tensor:
        """x (B, S, D) residual stream, chunks (B, S) -> phrases (B, S, D), 0 where no chunk starts."""
        phrases, _ = attentive_pool(
            self.norm(x), chunks, self.glance, self.token_hidden.weight, self.glance_hidden.weight,
            self.token_hidden.bias, self.score.weight,
        )
        return phrases


class PhraseCombination(nn.Module):
    """Attentive combination (Xu et al. §3.2): c = Attn(LN(x), phrases), then the 2-layer merge
    update = W₄ relu(W₃ [LN(x); c] + b₃) + b₄, added to x by the layer (residual, pre-norm)."""

    def __init__(self, config: Any):
        super().__init__()
        d = config.d_model
        self.norm = nn.LayerNorm(d)
        self.attention = VanillaAttention(d, config.n_heads, config.attention_dropout, "cross", {})
        self.merge_in = nn.Linear(2 * d, config.d_ff)
        self.merge_out = nn.Linear(config.d_ff, d)
        self.activation_dropout = config.activation_dropout

    def forward(self, x: torch.Tensor, phrases: torch.Tensor, phrase_mask: torch.Tensor) -> torch.Tensor:
        """x (B, S, D), phrases (B, S, D) of the previous layer, phrase_mask (B, S) True where no
        chunk starts -> the update (B, S, D) to add to x."""
        h = self.norm(x)
        context = self.attention(h, phrases, key_padding_mask=phrase_mask).out  # (B, S, D)
        hidden = F.relu(self.merge_in(torch.cat([h, context], dim=-1)))  # (B, S, d_ff)
        return self.merge_out(dropout(hidden, self.activation_dropout, self.training))


class PhraseCrossAttention(nn.Module):
    """Decoder-side phrase attention: transparent mix over the K encoder phrase representations,
    then multi-head attention of the target tokens to the mixed phrases."""

    def __init__(self, config: Any):
        super().__init__()
        d = config.d_model
        self.norm = nn.LayerNorm(d)
        # One logit per encoder-side representation (embeddings + every layer); 0 = an even mix.
        self.mix_logits = nn.Parameter(torch.zeros(config.encoder_layers + 1))
        self.attention = VanillaAttention(d, config.n_heads, config.attention_dropout, "cross", {})

    def mix_weights(self) -> torch.Tensor:
        """(K,) float32, summing to 1: how much of each encoder layer's phrases this layer reads."""
        return transparent_weights(self.mix_logits)

    def mixed(self, phrase_memory: torch.Tensor) -> torch.Tensor:
        """phrase_memory (B, K, S, D) -> (B, S, D)."""
        return transparent_mix(phrase_memory, self.mix_logits)

    def forward(
        self, x: torch.Tensor, phrase_memory: torch.Tensor, phrase_mask: torch.Tensor, need_weights: bool
    ) -> AttentionOut:
        """x (B, T, D) -> update (B, T, D) and, when asked, attention over chunk starts (B, H, T, S)."""
        return self.attention(
            self.norm(x), self.mixed(phrase_memory), key_padding_mask=phrase_mask, need_weights=need_weights
        )

    def init_state(self, phrase_memory: torch.Tensor) -> State:
        """The mixed phrases projected once per source: {"k", "v"} (N, H, S, dh)."""
        mixed = self.mixed(phrase_memory)
        return self.attention.init_state(mixed, mixed.shape[0], mixed.device, mixed.dtype)

    def step(
        self, x: torch.Tensor, state: State, phrase_mask: torch.Tensor, need_weights: bool
    ) -> AttentionOut:
        """x (N, 1, D) -> update (N, 1, D), attention (N, H, 1, S) when asked, the unchanged state."""
        return self.attention.step(self.norm(x), state, key_padding_mask=phrase_mask, need_weights=need_weights)


def encoder_poolings(config: Any) -> nn.ModuleList | None:
    """The K = encoder_layers + 1 poolings (embeddings, then every layer's output), or None when off."""
    if config.phrase_representation is None:
        return None
    glance = phrase_options(config.phrase_representation)["glance"]
    return nn.ModuleList(AttentivePooling(config.d_model, glance) for _ in range(config.encoder_layers + 1))
