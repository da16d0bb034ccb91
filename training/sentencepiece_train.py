"""Train the one joint, cased SentencePiece model of a language pair.

Ids are fixed by the contract: pad=0, bos=1, eos=2, unk=3. Determinism: the same sentences in
the same order with the same options give a byte-identical model; we feed every sentence (no
sampling), fix the generator seed and train single-threaded by default, since the unigram EM
sums in per-thread chunks.
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import Iterable

import sentencepiece as spm

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3


def train_sentencepiece(sentences: Iterable[str], model_path: str | Path, *, vocab_size: int = 10000,
                        model_type: str = "unigram", character_coverage: float = 1.0,
                        byte_fallback: bool = False, seed: int = 1, num_threads: int = 1) -> Path:
    """Train on `sentences` (source and target text together) and write `model_path` (a .model file).

    `vocab_size` is an upper bound (hard_vocab_limit off) so that tiny corpora in tests and smoke
    runs still train; read the real size from the model (`get_piece_size()`).
    """
    if model_type not in ("unigram", "bpe"):
        raise ValueError(f"model_type must be 'unigram' or 'bpe', got {model_type!r}")
    model_path = Path(model_path)
    if model_path.suffix != ".model":
        raise ValueError(f"model_path must end in .model, got {model_path}")
    model_path.parent.mkdir(parents=True, exist_ok=True)
    lines = [s for s in sentences if s.strip()]
    if not lines:
        raise ValueError("no training sentences for SentencePiece")

    spm.set_random_generator_seed(seed)
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=buffer,
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        byte_fallback=byte_fallback,
        pad_id=PAD_ID, bos_id=BOS_ID, eos_id=EOS_ID, unk_id=UNK_ID,
        pad_piece="<pad>", bos_piece="<s>", eos_piece="</s>", unk_piece="<unk>",
        hard_vocab_limit=False,
        input_sentence_size=0,          # use every sentence: no random sampling
        shuffle_input_sentence=False,
        num_threads=num_threads,
        max_sentence_length=1 << 14,
        minloglevel=2,                  # keep the trainer quiet; errors still raise
    )
    # Write atomically so that a crash never leaves a half-written model that a resumed run would trust.
    tmp = model_path.with_name(model_path.name + ".tmp")
    tmp.write_bytes(buffer.getvalue())
    tmp.replace(model_path)
    return model_path
