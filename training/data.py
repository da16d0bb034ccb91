"""Parallel data: reading the raw splits, length filtering, token-bounded batching, collation.

Conventions (docs/design.md §6, model/decoding/generate.py): pad=0, bos=1, eos=2. The source is fed as
x + [EOS] (as `model.decoding.generate.source_batch` does at inference); the target is fed as
tgt_in = [BOS] + y and predicted as tgt_out = y + [EOS]. The dataset stores the bare piece ids
x and y; `collate` adds the special ids, so every padded side has length len + 1.
"""
from __future__ import annotations

import gzip
import random
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from model.text.tokenizer import Tokenizer

PAD_ID, BOS_ID, EOS_ID = 0, 1, 2


def split_path(data_dir: str | Path, split: str, lang: str) -> Path:
    """`data_dir/split.lang.gz`, or the uncompressed file when only that exists."""
    base = Path(data_dir) / f"{split}.{lang}"
    gz = base.with_name(base.name + ".gz")
    if gz.exists() or not base.exists():
        return gz
    return base


def read_lines(path: str | Path, limit: int | None = None) -> list[str]:
    """One sentence a line, gzip or plain text, trailing newline and surrounding blanks removed."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"data file not found: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    lines: list[str] = []
    with opener(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if limit is not None and len(lines) >= limit:
                break
            lines.append(line.strip())
    return lines


def read_parallel(data_dir: str | Path, split: str, source_lang: str, target_lang: str,
                  limit: int | None = None) -> tuple[list[str], list[str]]:
    """The line-parallel source and target sentences of one split (the first `limit` pairs)."""
    src = read_lines(split_path(data_dir, split, source_lang), limit)
    tgt = read_lines(split_path(data_dir, split, target_lang), limit)
    if len(src) != len(tgt):
        raise ValueError(f"split {split!r}: {len(src)} {source_lang} lines but {len(tgt)} {target_lang} lines")
    return src, tgt


def read_training_text(recipe) -> tuple[list[str], list[str]]:
    """A recipe's training pairs: `train_split` of `data_dir` (its first `train_limit`), then every
    `train_mix` entry as many times as its `copies`."""
    src, tgt = read_parallel(recipe.data_dir, recipe.train_split, recipe.source_lang, recipe.target_lang,
                             recipe.train_limit)
    for mix in recipe.train_mix:
        mix_src, mix_tgt = read_parallel(mix["data_dir"], mix["split"], recipe.source_lang, recipe.target_lang)
        src, tgt = src + mix_src * mix["copies"], tgt + mix_tgt * mix["copies"]
    return src, tgt


class ParallelDataset(torch.utils.data.Dataset):
    """(source ids, target ids) pairs; pairs with an empty side or a side over `max_len` pieces are dropped.

    `kept` holds, for every pair kept, its line index in the original corpus.
    """

    def __init__(self, src_ids: Sequence[Sequence[int]], tgt_ids: Sequence[Sequence[int]],
                 max_len: int | None = None):
        if len(src_ids) != len(tgt_ids):
            raise ValueError(f"{len(src_ids)} source but {len(tgt_ids)} target sequences")
        self.src: list[list[int]] = []
        self.tgt: list[list[int]] = []
        self.kept: list[int] = []
        for i, (s, t) in enumerate(zip(src_ids, tgt_ids)):
            if not s or not t:
                continue
            if max_len is not None and (len(s) > max_len or len(t) > max_len):
                continue
            self.src.append(list(s))
            self.tgt.append(list(t))
            self.kept.append(i)
        self.dropped = len(src_ids) - len(self.kept)

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, index: int) -> tuple[list[int], list[int]]:
        return self.src[index], self.tgt[index]

    def src_lengths(self) -> list[int]:
        """Padded-tensor lengths of the source side: len(x) + 1 (EOS added)."""
        return [len(s) + 1 for s in self.src]

    def tgt_lengths(self) -> list[int]:
        """Padded-tensor lengths of the target side: len(y) + 1 (BOS or EOS added)."""
        return [len(t) + 1 for t in self.tgt]


def padded_tokens(n: int, max_src: int, max_tgt: int) -> int:
    """Padded size of a batch: its largest tensor, B x max(S, T)."""
    return n * max(max_src, max_tgt)


def token_batches(src_lengths: Sequence[int], tgt_lengths: Sequence[int], max_tokens: int, *,
                  seed: int, epoch: int, shuffle: bool = True) -> list[list[int]]:
    """Index batches of similar-length pairs whose padded size B x max(S, T) stays <= max_tokens.

    Pairs are sorted by (target, source) length (ties broken by a seeded per-epoch permutation, so
    batch contents vary between epochs), packed greedily, and the batch order is shuffled with a
    generator seeded by (seed, epoch): the same (seed, epoch) always gives the same batches, which
    is what lets a resumed run skip exactly the batches it already trained on.
    """
    if len(src_lengths) != len(tgt_lengths):
        raise ValueError("src_lengths and tgt_lengths differ in length")
    rng = random.Random(seed * 1_000_003 + epoch)
    order = list(range(len(src_lengths)))
    if shuffle:
        rng.shuffle(order)
    # A stable sort keeps the shuffled order among pairs of equal lengths.
    order.sort(key=lambda i: (tgt_lengths[i], src_lengths[i]))

    batches: list[list[int]] = []
    current: list[int] = []
    max_src = max_tgt = 0
    for i in order:
        need = padded_tokens(1, src_lengths[i], tgt_lengths[i])
        if need > max_tokens:
            raise ValueError(f"pair {i} needs {need} padded tokens, more than max_tokens={max_tokens}; "
                             f"lower max_len or raise max_tokens")
        new_src, new_tgt = max(max_src, src_lengths[i]), max(max_tgt, tgt_lengths[i])
        if current and padded_tokens(len(current) + 1, new_src, new_tgt) > max_tokens:
            batches.append(current)
            current, new_src, new_tgt = [], src_lengths[i], tgt_lengths[i]
        current.append(i)
        max_src, max_tgt = new_src, new_tgt
    if current:
        batches.append(current)
    if shuffle:
        rng.shuffle(batches)
    return batches


@dataclass
class Batch:
    """Padded tensors of one batch. src (B, S) = x + [EOS]; tgt_in, tgt_out (B, T); pad = 0."""

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    indices: list[int]

    @property
    def n_tgt_tokens(self) -> int:
        return int(self.tgt_out.ne(PAD_ID).sum())

    @property
    def n_src_tokens(self) -> int:
        return int(self.src.ne(PAD_ID).sum())

    def to(self, device: torch.device | str, *, pinned: bool = True) -> "Batch":
        """The batch on `device`. To a GPU the tensors go through page-locked memory: CUDA may make a
        copy from pageable memory wait for the work already queued on the device (its API
        synchronization behavior), and then the host cannot launch the next step while the GPU runs
        this one. `pinned=False` copies from pageable memory (benchmarks/training_step_profile.py
        compares the two)."""
        if torch.device(device).type != "cuda":
            return Batch(self.src.to(device), self.tgt_in.to(device), self.tgt_out.to(device), self.indices)
        move = (lambda t: t.pin_memory().to(device, non_blocking=True)) if pinned else (
            lambda t: t.to(device, non_blocking=True))
        return Batch(move(self.src), move(self.tgt_in), move(self.tgt_out), self.indices)


def pad_sequences(seqs: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> torch.Tensor:
    """Right-padded (B, max len) long tensor."""
    # One copy of every id, not one small tensor a row: a training step's batch holds hundreds of
    # rows, and on a GPU the host time spent here delays every kernel launch of the step.
    lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    width = int(lengths.max(initial=0))
    out = np.full((len(seqs), width), pad_id, dtype=np.int64)
    # A boolean mask assigns in row-major order: row by row, each row's ids left to right.
    out[np.arange(width) < lengths[:, None]] = np.fromiter(chain.from_iterable(seqs), dtype=np.int64,
                                                           count=int(lengths.sum()))
    return torch.from_numpy(out)


def collate(pairs: Sequence[tuple[Sequence[int], Sequence[int]]], indices: Sequence[int] | None = None,
            *, pad_id: int = PAD_ID, bos_id: int = BOS_ID, eos_id: int = EOS_ID) -> Batch:
    """src (B, S) = x + [EOS]; tgt_in (B, T) = [BOS] + y; tgt_out (B, T) = y + [EOS]; padded with pad_id."""
    src = pad_sequences([[*s, eos_id] for s, _ in pairs], pad_id)
    tgt_in = pad_sequences([[bos_id, *t] for _, t in pairs], pad_id)
    tgt_out = pad_sequences([[*t, eos_id] for _, t in pairs], pad_id)
    return Batch(src, tgt_in, tgt_out, list(indices) if indices is not None else list(range(len(pairs))))


def reverse_batch(batch: Batch, *, pad_id: int = PAD_ID, bos_id: int = BOS_ID, eos_id: int = EOS_ID) -> Batch:
    """The same pairs the other way round, equal to `collate` of the swapped pairs, made from the tensors:
    src = y + [EOS] (the old tgt_out), tgt_out = x + [EOS] (the old src), tgt_in = [BOS] + x."""
    bos = torch.full_like(batch.src[:, :1], bos_id)  # (B, 1)
    shifted = torch.cat([bos, batch.src[:, :-1]], dim=1)  # (B, S): [BOS] + x + [EOS] (cut at the widest row)
    tgt_in = shifted.masked_fill(shifted.eq(eos_id), pad_id)
    return Batch(batch.tgt_out, tgt_in, batch.src, list(batch.indices))


@dataclass
class Data:
    """What a run trains and validates on: the tokenizer, the encoded splits, and the validation
    sentences BLEU is measured on."""

    tokenizer: Tokenizer
    spm_path: Path
    train: ParallelDataset
    valid: ParallelDataset
    bleu_src: list[str]
    bleu_ref: list[str]
    # With a supervised alignment head: per training pair (dataset index), its (source piece, target
    # piece) label links (training.alignment_labels); None otherwise.
    train_alignment: list[list[tuple[int, int]]] | None = None
