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
from model.phrase_representation.modules import encoder_poolings
from model.phrase_representation.functional import fixed_chunks
from model.decoder_state import DecoderState, Memory


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
class StepOut:
    """One decoding step (`Transformer.decode_step`), for every backend alike (model/decoding/generate.py).

    log_probs (N, V) float32; attention (N, S) float32: the alignment layer's cross-attention,
    heads averaged (`head_average`), None where a backend gives none; phrase_attention
    (N, n_max, S) float32 as ModelOutput.phrase_attention, when asked; state: the new state.
    probs (N, H, S): the alignment layer's per-head probabilities (eager only).
    supervised_attention (N, S) float32: the supervised alignment head's row, when asked.
    """

    log_probs: torch.Tensor
    attention: torch.Tensor | None
    phrase_attention: torch.Tensor | None
    state: DecoderState
    probs: torch.Tensor | None = None
    supervised_attention: torch.Tensor | None = None


def head_average(probs: torch.Tensor) -> torch.Tensor:
    """Per-head attention (B, H, ...) -> the alignment's (B, ...): the mean over heads."""
    return probs.mean(dim=1)


# The added alignment head's keys in the decoding state (projected once per source).
SUPERVISED_KEYS = "supervised_alignment.k"


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        c = config
        self.source_embedding = TokenEmbedding(c.vocab_size, c.d_model, c.max_positions, c.pad_id, c.dropout,
                                               contextual=c.contextual_source_embeddings)
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
        for index, layer in enumerate(self.decoder_layers):
            aligned = need_attention and index == self.config.alignment_layer_index
            reads_head = index == supervised_layer and not supervised.added
            out = layer(
                x, memory.states, memory.pad_mask, need_weights=index == fertility_layer or reads_head,
                need_phrase_attention=aligned, phrase_representations=memory.phrase_representations, phrase_chunks=memory.phrase_chunks,
            )
            x = out.out
            if aligned:
                attention = head_average(out.probs)  # (B, T, S)
                phrases = head_average(out.phrase_attention)  # (B, T, n_max, S)
            if index == fertility_layer:
                mean, variance = self.global_fertility(memory.states)
                fertility = {"fertility_mean": mean, "fertility_variance": variance,
                             "fertility_attention": self.global_fertility.select(out.probs)}
            if index == supervised_layer:
                supervised_attention = (supervised.attend(x, supervised.keys(memory.states), memory.pad_mask,
                                                          tgt_in.eq(self.config.pad_id))
                                        if supervised.added else supervised.select(out.probs))  # (B, T, S)
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
        """The state before the first step, one row per sentence (`DecoderState.expand` makes the beams)."""
        n = memory.pad_mask.shape[0]
        tensors: dict[str, torch.Tensor] = {
            "position": torch.zeros(n, dtype=torch.long, device=memory.pad_mask.device),  # (N,) tokens decoded
            "memory_pad_mask": memory.pad_mask,
        }
        sentence = {"memory_pad_mask"}
        if memory.phrase_chunks is not None:
            tensors["phrase_chunks"] = memory.phrase_chunks  # (N, S): the segmentation and the phrase mask
            sentence.add("phrase_chunks")
        for index, layer in enumerate(self.decoder_layers):
            shared = layer.sentence_state()
            for part, state in layer.init_state(memory.states, memory.phrase_representations).items():
                for name, t in state.items():
                    tensors[f"layers.{index}.{part}.{name}"] = t
                sentence.update(f"layers.{index}.{part}.{name}" for name in shared[part])
        if self.supervised_alignment is not None and self.supervised_alignment.added:
            tensors[SUPERVISED_KEYS] = self.supervised_alignment.keys(memory.states)  # (N, S, dₕ)
            sentence.add(SUPERVISED_KEYS)
        return DecoderState(tensors, frozenset(sentence))

    def decode_step(self, tokens: torch.Tensor, state: DecoderState, need_phrase_attention: bool = False,
                    need_supervised: bool = False) -> StepOut:
        """tokens (N,) -> log-probs, the alignment layer's attention, with need_phrase_attention its phrase
        attention, with need_supervised the supervised alignment head's row, and the new state (`StepOut`).

        The phrase table is read off the same probabilities that give the attention, so a step
        with and without it computes the same numbers.
        """
        memory_pad_mask = state.tensors["memory_pad_mask"]
        position = state.tensors["position"]  # (N,)
        x = self.target_embedding(tokens.unsqueeze(1), position)  # (N, 1, D)
        new_tensors: dict[str, torch.Tensor] = {"position": position + 1, "memory_pad_mask": memory_pad_mask}
        phrase_chunks = state.tensors.get("phrase_chunks")
        if phrase_chunks is not None:
            new_tensors["phrase_chunks"] = phrase_chunks
        supervised = self.supervised_alignment
        if need_supervised and supervised is None:
            raise ValueError("this model has no supervised alignment head (ModelConfig.supervised_alignment)")
        if need_supervised and supervised.needs_finished_target:
            raise ValueError("this model's supervised alignment head reads the whole target: its rows come "
                             "from a forced pass of the finished hypothesis (Transformer.forward), not a step")
        if supervised is not None and supervised.added:
            new_tensors[SUPERVISED_KEYS] = state.tensors[SUPERVISED_KEYS]
        supervised_layer = supervised.layer_index if need_supervised else None
        aligned = supervised_attention = None
        for index, layer in enumerate(self.decoder_layers):
            prefix = f"layers.{index}"
            is_aligned = index == self.config.alignment_layer_index
            reads_head = index == supervised_layer and not supervised.added
            out = layer.step(
                x, {part: state.layer(f"{prefix}.{part}") for part in layer.state_parts}, memory_pad_mask,
                need_weights=is_aligned or reads_head, need_phrase_attention=is_aligned and need_phrase_attention,
                phrase_chunks=phrase_chunks,
            )
            x = out.out
            if is_aligned:
                aligned = out
            if reads_head:
                supervised_attention = supervised.select(out.probs).squeeze(1).float()  # (N, S)
            elif index == supervised_layer:
                keys = state.tensors[SUPERVISED_KEYS]
                supervised_attention = supervised.attend(x, keys, memory_pad_mask).squeeze(1).float()  # (N, S)
            for part, part_state in out.state.items():
                for name, t in part_state.items():
                    new_tensors[f"{prefix}.{part}.{name}"] = t
        logits = self._logits(self.decoder_norm(x)).squeeze(1)  # (N, V)
        probs = aligned.probs.squeeze(2)  # (N, H, S)
        phrases = head_average(aligned.phrase_attention).squeeze(1).float() if need_phrase_attention else None  # (N, n_max, S)
        new_state = DecoderState(new_tensors, state.sentence, state.rows_per_sentence)
        return StepOut(F.log_softmax(logits.float(), dim=-1), head_average(probs).float(), phrases, new_state, probs,
                       supervised_attention)

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        if self.output_projection is None:
            return F.linear(x, self.source_embedding.tokens.weight)
        return self.output_projection(x)
