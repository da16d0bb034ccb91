"""The pre-norm Transformer encoder-decoder: a full pass for training, encode + decode_step for search."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from model.config import ModelConfig
from model.embedding import TokenEmbedding
from model.layers import DecoderLayer, EncoderLayer
from model.state import DecoderState, Memory


@dataclass(frozen=True)
class ModelOutput:
    logits: torch.Tensor  # (B, T, V)
    attention: torch.Tensor | None  # (B, T, S): alignment layer's cross-attention, heads averaged


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        c = config
        self.source_embedding = TokenEmbedding(c.vocab_size, c.d_model, c.max_positions, c.pad_id, c.dropout)
        self.target_embedding = TokenEmbedding(c.vocab_size, c.d_model, c.max_positions, c.pad_id, c.dropout)
        if c.tie_embeddings:
            # One joint vocabulary: encoder, decoder and output projection share one matrix.
            self.target_embedding.tokens.weight = self.source_embedding.tokens.weight
        self.encoder_layers = nn.ModuleList(EncoderLayer(c) for _ in range(c.encoder_layers))
        self.encoder_norm = nn.LayerNorm(c.d_model)
        self.decoder_layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.decoder_layers))
        self.decoder_norm = nn.LayerNorm(c.d_model)
        self.output_projection = None if c.tie_embeddings else nn.Linear(c.d_model, c.vocab_size, bias=False)
        self._init_linear_weights()

    def _init_linear_weights(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    # -- full pass -------------------------------------------------------------------------
    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, need_attention: bool = False) -> ModelOutput:
        """src (B, S), tgt_in (B, T) = [BOS] + y -> logits (B, T, V) for y + [EOS]."""
        memory = self.encode(src)
        x = self.target_embedding(tgt_in)  # (B, T, D)
        attention = None
        for index, layer in enumerate(self.decoder_layers):
            wanted = need_attention and index == self.config.alignment_layer_index
            x, probs = layer(x, memory.states, memory.pad_mask, wanted)
            if wanted:
                attention = probs.mean(dim=1)  # (B, T, S)
        return ModelOutput(self._logits(self.decoder_norm(x)), attention)

    def encode(self, src: torch.Tensor) -> Memory:
        pad_mask = src.eq(self.config.pad_id)  # (B, S)
        x = self.source_embedding(src)  # (B, S, D)
        for layer in self.encoder_layers:
            x = layer(x, pad_mask)
        return Memory(self.encoder_norm(x), pad_mask)

    # -- incremental decoding --------------------------------------------------------------
    def init_state(self, memory: Memory) -> DecoderState:
        tensors: dict[str, torch.Tensor] = {"memory_pad_mask": memory.pad_mask}
        for index, layer in enumerate(self.decoder_layers):
            for part, state in layer.init_state(memory.states).items():
                for name, t in state.items():
                    tensors[f"layers.{index}.{part}.{name}"] = t
        return DecoderState(tensors)

    def decode_step(
        self, tokens: torch.Tensor, memory: Memory | None, state: DecoderState
    ) -> tuple[torch.Tensor, torch.Tensor, DecoderState]:
        """tokens (N,) -> log-probs (N, V) float32, attention (N, S) float32, new state.

        The position is the number of tokens decoded so far, read off the self-attention cache.
        `memory` is unused once the state holds the projected memory; it stays in the signature
        so that variants which need the raw encoder states can read them.
        """
        memory_pad_mask = state.tensors["memory_pad_mask"]
        position = state.tensors["layers.0.self.k"].shape[2]
        x = self.target_embedding(tokens.unsqueeze(1), position)  # (N, 1, D)
        new_tensors: dict[str, torch.Tensor] = {"memory_pad_mask": memory_pad_mask}
        attention = None
        for index, layer in enumerate(self.decoder_layers):
            prefix = f"layers.{index}"
            layer_state = {part: state.layer(f"{prefix}.{part}") for part in ("self", "cross")}
            wanted = index == self.config.alignment_layer_index
            x, probs, layer_state = layer.step(x, layer_state, memory_pad_mask, wanted)
            if wanted:
                attention = probs.mean(dim=1).squeeze(1).float()  # (N, S)
            for part, part_state in layer_state.items():
                for name, t in part_state.items():
                    new_tensors[f"{prefix}.{part}.{name}"] = t
        logits = self._logits(self.decoder_norm(x)).squeeze(1)  # (N, V)
        return F.log_softmax(logits.float(), dim=-1), attention, DecoderState(new_tensors)

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        if self.output_projection is None:
            return F.linear(x, self.source_embedding.tokens.weight)
        return self.output_projection(x)
