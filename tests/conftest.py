"""Fixtures shared by every package's tests (tiny models live in tests/helpers.py)."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest
import sentencepiece as spm
import torch

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data" / "multi30k"


def read_lines(split: str, lang: str, limit: int) -> list[str]:
    with gzip.open(DATA / f"{split}.{lang}.gz", "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for _, line in zip(range(limit), handle)]


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread for a module of tiny-model tests: a second thread only adds
    spin-waits, badly so on a busy 2-core box. Use with pytestmark = usefixtures("one_thread")."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_spm(tmp_path_factory) -> Path:
    """A 500-piece joint En+De SentencePiece model trained on 3,000 lines of the bundled data."""
    out = tmp_path_factory.mktemp("spm")
    text = read_lines("train", "en", 1500) + read_lines("train", "de", 1500)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(text), model_prefix=str(out / "spm"), vocab_size=500,
        pad_id=0, bos_id=1, eos_id=2, unk_id=3, character_coverage=1.0, minloglevel=2,
        num_threads=1,
    )
    return out / "spm.model"
