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
    # (B, T, n_max, S): [b, t, n-1, j] = weight of the source n-gram starting at j with length n,
    # heads averaged (a non-phrasal cross-attention gives its token attention as 1-grams).
    phrase_attention: torch.Tensor | None = None


@dataclass(frozen=True)
class StepOutput:
    """One decoding step with the phrase attention (`Transformer.decode_step_with_phrases`)."""

    log_probs: torch.Tensor  # (N, V) float32
    attention: torch.Tensor  # (N, S) float32
    phrase_attention: torch.Tensor  # (N, n_max, S) float32, as ModelOutput.phrase_attention
    state: DecoderState


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
        attention = phrases = None
        for index, layer in enumerate(self.decoder_layers):
            if need_attention and index == self.config.alignment_layer_index:
                x, probs, layer_phrases = layer(x, memory.states, memory.pad_mask, True, need_phrases=True)
                attention = probs.mean(dim=1)  # (B, T, S)
                phrases = layer_phrases.mean(dim=1)  # (B, T, n_max, S)
            else:
                x, _ = layer(x, memory.states, memory.pad_mask, False)
        return ModelOutput(self._logits(self.decoder_norm(x)), attention, phrases)

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

        The position is the number of tokens decoded so far, read off the self-attention cache
        (every attention kind keeps its self-attention keys as "k" with the steps on dim 2).
        `memory` is unused once the state holds the projected memory; it stays in the signature
        so that variants which need the raw encoder states can read them.
        """
        log_probs, attention, _, new_state = self._step(tokens, state, need_phrases=False)
        return log_probs, attention, new_state

    def decode_step_with_phrases(self, tokens: torch.Tensor, memory: Memory | None, state: DecoderState) -> StepOutput:
        """`decode_step` plus the alignment layer's phrase attention (N, n_max, S) float32."""
        return StepOutput(*self._step(tokens, state, need_phrases=True))

    def _step(self, tokens: torch.Tensor, state: DecoderState, need_phrases: bool):
        memory_pad_mask = state.tensors["memory_pad_mask"]
        position = state.tensors["layers.0.self.k"].shape[2]
        x = self.target_embedding(tokens.unsqueeze(1), position)  # (N, 1, D)
        new_tensors: dict[str, torch.Tensor] = {"memory_pad_mask": memory_pad_mask}
        attention = phrases = None
        for index, layer in enumerate(self.decoder_layers):
            prefix = f"layers.{index}"
            layer_state = {part: state.layer(f"{prefix}.{part}") for part in ("self", "cross")}
            if index == self.config.alignment_layer_index:
                if need_phrases:
                    x, probs, layer_phrases, layer_state = layer.step(x, layer_state, memory_pad_mask, True, need_phrases=True)
                    phrases = layer_phrases.mean(dim=1).squeeze(1).float()  # (N, n_max, S)
                else:
                    x, probs, layer_state = layer.step(x, layer_state, memory_pad_mask, True)
                attention = probs.mean(dim=1).squeeze(1).float()  # (N, S)
            else:
                x, _, layer_state = layer.step(x, layer_state, memory_pad_mask, False)
            for part, part_state in layer_state.items():
                for name, t in part_state.items():
                    new_tensors[f"{prefix}.{part}.{name}"] = t
        logits = self._logits(self.decoder_norm(x)).squeeze(1)  # (N, V)
        return F.log_softmax(logits.float(), dim=-1), attention, phrases, DecoderState(new_tensors)

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        if self.output_projection is None:
            return F.linear(x, self.source_embedding.tokens.weight)
        return self.output_projection(x)
