"""Word alignments from a model by forced decoding of the reference (the model side of align_eval).

The reference target is forced through the model — ``model(src + [EOS], [BOS] + y, need_attention=True)``
— and the chosen decoder layer's cross-attention, heads averaged, is read off: row k of the
result is the step that PREDICTS target piece k (input y_{k-1}), the step whose attention the
service returns for a generated token. ``shift=True`` reads the step that takes piece k as its
INPUT instead (row k+1), the "shift-att" of Chen et al. (2020), which is often the better
aligner. The EOS column and the EOS-predicting row are dropped.

Words are the whitespace tokens of the sentence files. Each sentence is encoded as its tokens
joined by one space (the way the model saw text in training), and every piece is given to the
word whose characters its span starts in, so piece groups and gold words coincide by
construction, whatever SentencePiece's normalisation does to the characters.
"""
from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from model.model_dir import LoadedModel
from model.alignments.cognates import COGNATE_WEIGHT, with_cognates
from model.alignments.symmetrisation import matrix_links
from model.alignments.word_alignment import glued_punctuation
from model.alignments.word_alignment import soft_links as word_links
from model.text.tokenizer import Span, Tokenizer
from model.transformer import Transformer
from training.alignment_metrics import AlignmentInputError, Link


@dataclass(frozen=True)
class EncodedSentence:
    words: list[str]
    ids: list[int]  # pieces, no special ids
    owner: list[int | None]  # per piece, the index of its word; None for a piece with no characters
    glued: list[bool]  # per piece, punctuation glued to a word of other pieces (word_alignment.glued_punctuation)


@dataclass(frozen=True)
class DirectionAlignments:
    """One direction's links per sentence pair, in the model's own (source, target) orientation."""

    hard: list[set[Link]]  # per target word, its heaviest source word
    soft: list[set[Link]] | None  # every link whose share of the target word's attention is >= threshold
    # the word matrix read both ways, symmetrised (model.alignments.symmetrisation.matrix_links)
    symmetric: list[set[Link]] | None = None
    # per target word its (source word, weight) links, as the service's TokenAlignment.links has them
    # (model.alignments.word_alignment.soft_links): what the bidirectional combination reads
    rows: list[list[list[tuple[int, float]]]] | None = None


def word_owner(words: Sequence[str], spans: Sequence[Span]) -> list[int | None]:
    """Each piece's word in ``" ".join(words)``: the word its span starts in (None for an empty span)."""
    starts: list[int] = []
    position = 0
    for word in words:
        starts.append(position)
        position += len(word) + 1
    owner: list[int | None] = []
    for begin, end in spans:
        owner.append(bisect.bisect_right(starts, begin) - 1 if begin < end else None)
    return owner


def encode_words(tokenizer: Tokenizer, words: Sequence[str]) -> EncodedSentence:
    ids, pieces, spans = tokenizer.encode_with_offsets(" ".join(words))
    owner = word_owner(words, spans)
    return EncodedSentence(list(words), ids, owner, glued_punctuation(pieces, owner))


def word_weights(
    attention: torch.Tensor, target_owner: Sequence[int | None], source_owner: Sequence[int | None],
    n_target: int, n_source: int, target_glued: Sequence[bool] = (), source_glued: Sequence[bool] = (),
) -> torch.Tensor:
    """Piece attention (T_pieces, S_pieces) -> word weights (T_words, S_words).

    The conventions of model.alignments.word_alignment.word_attention: a source word gets the SUM of its pieces'
    attention, a target word the MEAN of its pieces' rows, punctuation glued to a word of other
    pieces (`*_glued`) left out and its source columns' mass spread over the row in proportion; a
    word without pieces gets zeros instead of a division by zero.
    """
    source_map = torch.zeros(len(source_owner), n_source, dtype=attention.dtype)  # (S_pieces, S_words)
    for s, i in enumerate(source_owner):
        if i is not None:
            source_map[s, i] = 1.0
    target_map = torch.zeros(n_target, len(target_owner), dtype=attention.dtype)  # (T_words, T_pieces)
    for t, j in enumerate(target_owner):
        if j is not None and not (target_glued and target_glued[t]):
            target_map[j, t] = 1.0
    target_map = target_map / target_map.sum(dim=1, keepdim=True).clamp_min(1.0)
    rows = target_map @ attention  # (T_words, S_pieces)
    kept_map = source_map.clone()
    for s, glued in enumerate(source_glued):
        if glued:
            kept_map[s] = 0.0
    kept = rows @ kept_map  # (T_words, S_words)
    total, share = (rows @ source_map).sum(dim=1, keepdim=True), kept.sum(dim=1, keepdim=True)
    return torch.where(share > 0, kept * total / share.where(share > 0, torch.ones_like(share)), kept)


def hard_links(weights: torch.Tensor) -> set[Link]:
    """Per target word j, its heaviest source word i (ties: the lower i); rows with no finite mass give none."""
    links: set[Link] = set()
    for j, row in enumerate(weights.tolist()):
        if row and all(math.isfinite(w) for w in row) and sum(row) > 0.0:
            links.add((max(range(len(row)), key=lambda i: (row[i], -i)), j))
    return links


def soft_links(weights: torch.Tensor, threshold: float) -> set[Link]:
    """Every (i, j) whose share of target word j's attention over source WORDS is >= threshold."""
    links: set[Link] = set()
    for j, row in enumerate(weights.tolist()):
        total = sum(row)
        if not row or not math.isfinite(total) or total <= 0.0:
            continue
        links.update((i, j) for i, w in enumerate(row) if w / total >= threshold)
    return links


def model_for_layer(model: Transformer, layer: int) -> Transformer:
    """The model whose forward returns decoder layer `layer`'s cross-attention (negative counts from the end).

    Transformer.forward returns config.alignment_layer's attention; another layer's comes from a
    copy with that config changed and the same weights, so the model code stays untouched.
    """
    config = model.config
    if not -config.decoder_layers <= layer < config.decoder_layers:
        raise AlignmentInputError(
            f"--layer {layer}: the model has {config.decoder_layers} decoder layers "
            f"(0..{config.decoder_layers - 1}, or negative from the end)")
    index = layer % config.decoder_layers
    if index == config.alignment_layer_index:
        return model
    parameter = next(model.parameters())
    copy = Transformer(dataclasses.replace(config, alignment_layer=index))
    copy.load_state_dict(model.state_dict())
    return copy.to(device=parameter.device, dtype=parameter.dtype).eval()


def _pad(rows: list[list[int]], pad_id: int, device: torch.device) -> torch.Tensor:
    width = max(len(r) for r in rows)
    batch = torch.full((len(rows), width), pad_id, dtype=torch.long)  # (B, L)
    for b, row in enumerate(rows):
        batch[b, : len(row)] = torch.tensor(row, dtype=torch.long)
    return batch.to(device)


@torch.inference_mode()
def forced_attention(
    model: Transformer, sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]],
    shift: bool = False, batch_size: int = 32, supervised: bool = False,
) -> list[torch.Tensor]:
    """Per pair, the (len(target), len(source)) float64 CPU cross-attention of the forced reference;
    with `supervised`, the supervised alignment head's rows instead (always those of the steps that
    read each piece: the rows it was trained on)."""
    c = model.config
    device = next(model.parameters()).device
    order = sorted(range(len(sources)), key=lambda k: (len(sources[k]), len(targets[k])))
    result: list[torch.Tensor] = [torch.zeros(0, 0)] * len(sources)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        src = _pad([[*sources[k], c.eos_id] for k in chunk], c.pad_id, device)  # (B, S+1)
        tgt_in = _pad([[c.bos_id, *targets[k]] for k in chunk], c.pad_id, device)  # (B, T+1)
        out = model(src, tgt_in, need_attention=not supervised)
        attention = (out.supervised_attention if supervised else out.attention).double().cpu()  # (B, T+1, S+1)
        for b, k in enumerate(chunk):
            n_t, n_s = len(targets[k]), len(sources[k])
            first = 1 if shift or supervised else 0
            result[k] = attention[b, first : first + n_t, :n_s].clone()  # (T, S)
    return result


def align_direction(
    loaded: LoadedModel, source_words: Sequence[Sequence[str]], target_words: Sequence[Sequence[str]],
    *, layer: int | None = None, shift: bool = False, threshold: float | None = None,
    batch_size: int = 32, name: str = "model", supervised: bool = False, link_threshold: float | None = None,
    cognate_weight: float = COGNATE_WEIGHT,
) -> DirectionAlignments:
    """Forced-decode every pair with `loaded` and turn its attention (or its supervised alignment head's,
    with `supervised`) into word links. The symmetrised links use `link_threshold`
    (model.alignments.symmetrisation.matrix_links); None: the supervised head's own with `supervised`, else 0.
    `cognate_weight`: the orthographic prior added to the matrix they are read from (model.alignments.cognates)."""
    if link_threshold is None:
        head = loaded.model.supervised_alignment
        link_threshold = head.link_threshold if supervised and head is not None else 0.0
    if supervised and loaded.model.supervised_alignment is None:
        raise AlignmentInputError(f"{name}: the model has no supervised alignment head (ModelConfig.supervised_alignment)")
    model = loaded.model if supervised else model_for_layer(
        loaded.model, loaded.config.alignment_layer if layer is None else layer)
    sources = [encode_words(loaded.tokenizer, words) for words in source_words]
    targets = [encode_words(loaded.tokenizer, words) for words in target_words]
    limit = loaded.config.max_positions - 1  # EOS on the source, BOS on the target
    for k, (s, t) in enumerate(zip(sources, targets), start=1):
        for side, encoded in (("source", s), ("target", t)):
            if len(encoded.ids) > limit:
                raise AlignmentInputError(
                    f"{name}: sentence {k} has {len(encoded.ids)} {side} pieces, more than the "
                    f"{limit} the model's max_positions allows")
    attention = forced_attention(model, [s.ids for s in sources], [t.ids for t in targets], shift, batch_size,
                                 supervised)
    hard: list[set[Link]] = []
    soft: list[set[Link]] = []
    symmetric: list[set[Link]] = []
    rows: list[list[list[tuple[int, float]]]] = []
    for s, t, a, s_words, t_words in zip(sources, targets, attention, source_words, target_words):
        weights = word_weights(a, t.owner, s.owner, len(t.words), len(s.words), t.glued, s.glued)  # (T_words, S_words)
        hard.append(hard_links(weights))
        matrix = weights.tolist()
        symmetric.append(matrix_links(with_cognates(matrix, s_words, t_words, cognate_weight), link_threshold))
        rows.append([word_links(row) for row in matrix])
        if threshold is not None:
            soft.append(soft_links(weights, threshold))
    return DirectionAlignments(hard, soft if threshold is not None else None, symmetric, rows)
