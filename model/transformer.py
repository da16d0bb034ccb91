"""The pre-norm Transformer encoder-decoder: a full pass for training, encode + decode_step for search."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from model.config import ModelConfig
from model.embedding import TokenEmbedding
from model.global_fertility import GlobalFertility
from model.supervised_alignment import SupervisedAlignment
from model.layers import DecoderLayer, EncoderLayer
from model.phrase_layers import encoder_poolings
from model.phrase_representation import fixed_chunks
from model.state import DecoderState, Memory


@dataclass(frozen=True)
class ModelOutput:
    logits: torch.Tensor  # (B, T, V)
    attention: torch.Tensor | None  # (B, T, S): alignment layer's cross-attention, heads averaged
    # (B, T, n_max, S): [b, t, n-1, j] = weight of the source n-gram starting at j with length n,
    # heads averaged (a non-phrasal cross-attention gives its token attention as 1-grams).
    phrase_attention: torch.Tensor | None = None
    # With config.global_fertility: the fertility Gaussian of every source position (B, S), float32,
    # and the configured layer's cross-attention (B, T, S) (heads averaged, or the configured head).
    fertility_mean: torch.Tensor | None = None
    fertility_variance: torch.Tensor | None = None
    fertility_attention: torch.Tensor | None = None
    # With config.phrase_representation: the source segmentation (B, S) int64, the length of the
    # chunk starting at j (0 where none starts); phrase_attention is then over these chunks, unless
    # the cross-attention is phrasal and reports its own n-grams (`DecoderLayer.forward` says why).
    phrase_chunks: torch.Tensor | None = None
    # With config.supervised_alignment: the supervised head's cross-attention (B, T, S), not averaged
    # (row t is the step whose input is tgt_in[t]; `model.supervised_alignment` says which row is trained).
    supervised_attention: torch.Tensor | None = None


@dataclass(frozen=True)
class StepOutput:
    """One decoding step with the phrase attention (`Transformer.decode_step_with_phrases`)."""

    log_probs: torch.Tensor  # (N, V) float32
    attention: torch.Tensor  # (N, S) float32
    phrase_attention: torch.Tensor | None  # (N, n_max, S) float32, as ModelOutput.phrase_attention
    state: DecoderState
    supervised_attention: torch.Tensor | None = None  # (N, S) float32: the supervised alignment head's row


# The added alignment head's keys in the decoding state (projected once per source).
SUPERVISED_KEYS = "supervised_alignment.k"


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
        # Attentive phrase representations (Xu et al.): chunk pooling of the embeddings and each layer's output.
        self.phrase_pooling = encoder_poolings(c)
        self.decoder_layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.decoder_layers))
        self.decoder_norm = nn.LayerNorm(c.d_model)
        self.output_projection = None if c.tie_embeddings else nn.Linear(c.d_model, c.vocab_size, bias=False)
        self.global_fertility = GlobalFertility(c) if c.global_fertility is not None else None
        # Options only: the supervised head is one of the existing cross-attention heads.
        self.supervised_alignment = SupervisedAlignment(c) if c.supervised_alignment is not None else None
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
        fertility: dict[str, torch.Tensor] = {}
        fertility_layer = self.global_fertility.layer_index if self.global_fertility is not None else None
        supervised = self.supervised_alignment
        supervised_layer = supervised.layer_index if supervised is not None else None
        supervised_attention = None
        phrase_inputs = {"phrase_memory": memory.phrases, "phrase_chunks": memory.phrase_chunks}
        for index, layer in enumerate(self.decoder_layers):
            if need_attention and index == self.config.alignment_layer_index:
                x, probs, layer_phrases = layer(x, memory.states, memory.pad_mask, True, need_phrases=True, **phrase_inputs)
                attention = probs.mean(dim=1)  # (B, T, S)
                phrases = layer_phrases.mean(dim=1)  # (B, T, n_max, S)
            else:
                weights = index == fertility_layer or (index == supervised_layer and not supervised.added)
                x, probs = layer(x, memory.states, memory.pad_mask, weights, **phrase_inputs)
            if index == fertility_layer:
                mean, variance = self.global_fertility(memory.states)
                fertility = {"fertility_mean": mean, "fertility_variance": variance,
                             "fertility_attention": self.global_fertility.select(probs)}
            if index == supervised_layer:
                supervised_attention = (supervised.attend(x, supervised.keys(memory.states), memory.pad_mask)
                                        if supervised.added else supervised.select(probs))  # (B, T, S)
        return ModelOutput(self._logits(self.decoder_norm(x)), attention, phrases, **fertility,
                           phrase_chunks=memory.phrase_chunks, supervised_attention=supervised_attention)

    def encode(self, src: torch.Tensor) -> Memory:
        pad_mask = src.eq(self.config.pad_id)  # (B, S)
        x = self.source_embedding(src)  # (B, S, D)
        if self.phrase_pooling is not None:
            return self._encode_with_phrases(x, pad_mask)
        for layer in self.encoder_layers:
            x = layer(x, pad_mask)
        return Memory(self.encoder_norm(x), pad_mask)

    def _encode_with_phrases(self, x: torch.Tensor, pad_mask: torch.Tensor) -> Memory:
        """Every encoder layer reads the phrases pooled from its input (the previous layer's output),
        and the embeddings and every layer's output each give one phrase representation (Xu et al.)."""
        chunks = fixed_chunks(pad_mask)  # (B, S)
        no_chunk = chunks.eq(0)  # (B, S)
        phrases = [self.phrase_pooling[0](x, chunks)]
        for layer, pooling in zip(self.encoder_layers, self.phrase_pooling[1:]):
            x = layer(x, pad_mask, phrases[-1], no_chunk)
            phrases.append(pooling(x, chunks))
        return Memory(self.encoder_norm(x), pad_mask, torch.stack(phrases, dim=1), chunks)  # phrases (B, K, S, D)

    # -- incremental decoding --------------------------------------------------------------
    def init_state(self, memory: Memory) -> DecoderState:
        tensors: dict[str, torch.Tensor] = {"memory_pad_mask": memory.pad_mask}
        if memory.phrase_chunks is not None:
            tensors["phrase_chunks"] = memory.phrase_chunks  # (N, S): the segmentation and the phrase mask
        for index, layer in enumerate(self.decoder_layers):
            for part, state in layer.init_state(memory.states, memory.phrases).items():
                for name, t in state.items():
                    tensors[f"layers.{index}.{part}.{name}"] = t
        if self.supervised_alignment is not None and self.supervised_alignment.added:
            tensors[SUPERVISED_KEYS] = self.supervised_alignment.keys(memory.states)  # (N, S, dₕ)
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
        log_probs, attention, _, _, new_state = self._step(tokens, state, need_phrases=False)
        return log_probs, attention, new_state

    def decode_step_with_alignment(self, tokens: torch.Tensor, memory: Memory | None, state: DecoderState,
                                   need_phrases: bool = False) -> StepOutput:
        """`decode_step` plus the supervised alignment head's row (N, S) float32 (the model must have the
        head), and with need_phrases the phrase attention as `decode_step_with_phrases` gives it."""
        if self.supervised_alignment is None:
            raise ValueError("this model has no supervised alignment head (ModelConfig.supervised_alignment)")
        log_probs, attention, phrases, supervised, new_state = self._step(tokens, state, need_phrases=need_phrases,
                                                                          need_supervised=True)
        return StepOutput(log_probs, attention, phrases, new_state, supervised)

    def decode_step_with_phrases(self, tokens: torch.Tensor, memory: Memory | None, state: DecoderState) -> StepOutput:
        """`decode_step` plus the alignment layer's phrase attention (N, n_max, S) float32."""
        log_probs, attention, phrases, _, new_state = self._step(tokens, state, need_phrases=True)
        return StepOutput(log_probs, attention, phrases, new_state)

    def _step(self, tokens: torch.Tensor, state: DecoderState, need_phrases: bool, need_supervised: bool = False):
        memory_pad_mask = state.tensors["memory_pad_mask"]
        position = state.tensors["layers.0.self.k"].shape[2]
        x = self.target_embedding(tokens.unsqueeze(1), position)  # (N, 1, D)
        new_tensors: dict[str, torch.Tensor] = {"memory_pad_mask": memory_pad_mask}
        phrase_chunks = state.tensors.get("phrase_chunks")
        if phrase_chunks is not None:
            new_tensors["phrase_chunks"] = phrase_chunks
        supervised = self.supervised_alignment
        if supervised is not None and supervised.added:
            new_tensors[SUPERVISED_KEYS] = state.tensors[SUPERVISED_KEYS]
        supervised_layer = supervised.layer_index if need_supervised else None
        attention = phrases = supervised_attention = None
        for index, layer in enumerate(self.decoder_layers):
            prefix = f"layers.{index}"
            layer_state = {part: state.layer(f"{prefix}.{part}") for part in layer.state_parts}
            if index == supervised_layer and not supervised.added and index != self.config.alignment_layer_index:
                # The supervised head is one of this layer's heads: its weights are read here.
                x, probs, layer_state = layer.step(x, layer_state, memory_pad_mask, True, phrase_chunks=phrase_chunks)
                supervised_attention = supervised.select(probs).squeeze(1).float()  # (N, S)
            elif index == self.config.alignment_layer_index:
                if need_phrases:
                    x, probs, layer_phrases, layer_state = layer.step(
                        x, layer_state, memory_pad_mask, True, need_phrases=True, phrase_chunks=phrase_chunks
                    )
                    phrases = layer_phrases.mean(dim=1).squeeze(1).float()  # (N, n_max, S)
                else:
                    x, probs, layer_state = layer.step(x, layer_state, memory_pad_mask, True, phrase_chunks=phrase_chunks)
                attention = probs.mean(dim=1).squeeze(1).float()  # (N, S)
                if index == supervised_layer and not supervised.added:
                    supervised_attention = supervised.select(probs).squeeze(1).float()  # (N, S)
            else:
                x, _, layer_state = layer.step(x, layer_state, memory_pad_mask, False, phrase_chunks=phrase_chunks)
            if index == supervised_layer and supervised.added:
                keys = state.tensors[SUPERVISED_KEYS]
                supervised_attention = supervised.attend(x, keys, memory_pad_mask).squeeze(1)  # (N, S)
            for part, part_state in layer_state.items():
                for name, t in part_state.items():
                    new_tensors[f"{prefix}.{part}.{name}"] = t
        logits = self._logits(self.decoder_norm(x)).squeeze(1)  # (N, V)
        return (F.log_softmax(logits.float(), dim=-1), attention, phrases, supervised_attention,
                DecoderState(new_tensors))

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        if self.output_projection is None:
            return F.linear(x, self.source_embedding.tokens.weight)
        return self.output_projection(x)
