"""The modules of the attentive source-phrase representations (Xu et al., 2020); the math lives
in model/phrase_representation/functional.py, and the options in model/phrase_representation/options.py.

- `PhrasePooling`: one vector per fixed chunk of a layer's token states: attentive (§3.1, eq. 1-4)
  or, for the ablation, the plain mean / max of the chunk. The encoder owns encoder_layers + 1 of
  them: the embeddings and every layer's output.
- `CombinationNetwork`: W₄σ(W₃[x | c] + b₃) + b₄, the attentive combination's merge (eq. 8).
- `PhraseCombination`: the encoder sublayer that merges phrases into the token stream (§3.2):
  tokens cross-attend to the previous layer's phrases (eq. 7), then the combination (eq. 8).
- `PhraseCrossAttention`: the decoder sublayer before the token cross-attention: a learned
  softmax mix over the encoder's phrase representations (transparent attention; or the last
  encoder layer's alone), cross-attention to it, then (by default, as in the paper) the same
  attentive combination as the encoder's. Its keys and values are projected once per source
  (`init_state`).

Every sublayer is pre-norm (LayerNorm on its input) and returns the update that its layer adds
to the residual stream through dropout, like every other sublayer of this Transformer: the
paper's post-norm x' = LN(combination + x + c) becomes x' = x + Dropout(combination(LN(x), c)).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from model.attention.contract import AttentionOut
from model.attention.vanilla import VanillaAttention
from model.phrase_representation.functional import (
    attentive_combination,
    attentive_pool,
    plain_pool,
    transparent_mix,
    transparent_weights,
)
from model.phrase_representation.options import phrase_options

State = dict[str, torch.Tensor]


class PhrasePooling(nn.Module):
    """Pools a (normalised) token stream into one vector per chunk. Attentive: W₁ = [token | glance],
    b₁, W₂ (eq. 1-4); mean / max: no parameters besides the LayerNorm."""

    def __init__(self, d_model: int, pooling: str, glance: str):
        super().__init__()
        self.pooling = pooling
        self.glance = glance
        self.norm = nn.LayerNorm(d_model)
        if pooling == "attentive":
            self.token_hidden = nn.Linear(d_model, d_model)  # W₁'s token half and b₁
            self.glance_hidden = nn.Linear(d_model, d_model, bias=False)  # W₁'s glance half
            self.score = nn.Linear(d_model, 1, bias=False)  # W₂

    def forward(self, x: torch.Tensor, chunks: torch.Tensor) -> torch.Tensor:
        """x (B, S, D) residual stream, chunks (B, S) -> phrases (B, S, D), 0 where no chunk starts."""
        if self.pooling != "attentive":
            return plain_pool(self.norm(x), chunks, self.pooling)
        phrases, _ = attentive_pool(
            self.norm(x), chunks, self.glance, self.token_hidden.weight, self.glance_hidden.weight,
            self.token_hidden.bias, self.score.weight,
        )
        return phrases


class CombinationNetwork(nn.Module):
    """W₃, b₃, W₄, b₄ of the attentive combination W₄σ(W₃[x | c] + b₃) + b₄ (Xu et al. eq. 8)."""

    def __init__(self, config: Any):
        super().__init__()
        d = config.d_model
        self.hidden = nn.Linear(2 * d, config.d_ff)  # W₃, b₃
        self.out = nn.Linear(config.d_ff, d)  # W₄, b₄
        self.activation = phrase_options(config.phrase_representation)["activation"]
        self.activation_dropout = config.activation_dropout

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """x, context (…, D) -> the update (…, D)."""
        return attentive_combination(
            x, context, self.hidden.weight, self.hidden.bias, self.out.weight, self.out.bias,
            self.activation, self.activation_dropout, self.training,
        )


class PhraseCombination(nn.Module):
    """Attentive combination in the encoder (Xu et al. §3.2): c = Attn(LN(x), phrases) (eq. 7), then
    update = W₄σ(W₃[LN(x) | c] + b₃) + b₄ (eq. 8), added to x by the layer (residual, pre-norm)."""

    def __init__(self, config: Any):
        super().__init__()
        self.norm = nn.LayerNorm(config.d_model)
        self.attention = VanillaAttention(config.d_model, config.n_heads, config.attention_dropout, "cross", {})
        self.merge = CombinationNetwork(config)

    def forward(self, x: torch.Tensor, phrases: torch.Tensor, phrase_mask: torch.Tensor) -> torch.Tensor:
        """x (B, S, D), phrases (B, S, D) of the previous layer, phrase_mask (B, S) True where no
        chunk starts -> the update (B, S, D) to add to x."""
        h = self.norm(x)
        context = self.attention(h, phrases, key_padding_mask=phrase_mask).out  # (B, S, D)
        return self.merge(h, context)


class PhraseCrossAttention(nn.Module):
    """Decoder-side phrase attention: the transparent mix over the K encoder phrase representations
    (or the last one alone), multi-head attention of the target tokens to the mixed phrases (eq. 7),
    and, with decoder_combination "attentive", the attentive combination (eq. 8) of the tokens and
    that context; with "residual", the attention's output is the update itself."""

    def __init__(self, config: Any):
        super().__init__()
        d = config.d_model
        options = phrase_options(config.phrase_representation)
        self.norm = nn.LayerNorm(d)
        self.representations = config.encoder_layers + 1  # K: the embeddings and every encoder layer
        # One logit per encoder-side representation (embeddings + every layer); 0 = an even mix.
        self.mix_logits = nn.Parameter(torch.zeros(config.encoder_layers + 1)) if options["transparent"] else None
        self.attention = VanillaAttention(d, config.n_heads, config.attention_dropout, "cross", {})
        self.merge = CombinationNetwork(config) if options["decoder_combination"] == "attentive" else None

    def mix_weights(self) -> torch.Tensor:
        """(K,) float32, summing to 1: how much of each encoder layer's phrases this layer reads."""
        if self.mix_logits is None:  # transparent attention off: the last encoder layer alone
            return torch.eye(self.representations)[-1]
        return transparent_weights(self.mix_logits)

    def mixed(self, phrase_representations: torch.Tensor) -> torch.Tensor:
        """phrase_representations (B, K, S, D) -> (B, S, D): the transparent mix, or the last encoder layer's."""
        if self.mix_logits is None:
            return phrase_representations[:, -1]  # (B, S, D)
        return transparent_mix(phrase_representations, self.mix_logits)

    def forward(
        self, x: torch.Tensor, phrase_representations: torch.Tensor, phrase_mask: torch.Tensor, need_weights: bool
    ) -> AttentionOut:
        """x (B, T, D) -> update (B, T, D) and, when asked, attention over chunk starts (B, H, T, S)."""
        h = self.norm(x)
        attended = self.attention(h, self.mixed(phrase_representations), key_padding_mask=phrase_mask, need_weights=need_weights)
        return self._combined(h, attended)

    def init_state(self, phrase_representations: torch.Tensor) -> State:
        """The mixed phrases projected once per source: {"k", "v"} (N, H, S, dh)."""
        mixed = self.mixed(phrase_representations)
        return self.attention.init_state(mixed, mixed.shape[0], mixed.device, mixed.dtype)

    def step(
        self, x: torch.Tensor, state: State, phrase_mask: torch.Tensor, need_weights: bool
    ) -> AttentionOut:
        """x (N, 1, D) -> update (N, 1, D), attention (N, H, 1, S) when asked, the unchanged state."""
        h = self.norm(x)
        attended = self.attention.step(h, state, key_padding_mask=phrase_mask, need_weights=need_weights)
        return self._combined(h, attended)

    def _combined(self, h: torch.Tensor, attended: AttentionOut) -> AttentionOut:
        if self.merge is None:
            return attended
        return AttentionOut(self.merge(h, attended.out), attended.probs, attended.phrase_attention, attended.state)


def encoder_poolings(config: Any) -> nn.ModuleList | None:
    """The K = encoder_layers + 1 poolings (embeddings, then every layer's output), or None when off."""
    if config.phrase_representation is None:
        return None
    options = phrase_options(config.phrase_representation)
    return nn.ModuleList(
        PhrasePooling(config.d_model, options["pooling"], options["glance"]) for _ in range(config.encoder_layers + 1)
    )
