"""Reading, filtering, token batching and collation."""
import gzip

import pytest
import torch

from training.data import ParallelDataset, collate, pad_sequences, read_parallel, token_batches


def test_collate_pads_and_adds_special_ids():
    batch = collate([([5, 6, 7], [8, 9]), ([10], [11, 12, 13])], indices=[4, 2])
    assert batch.src.tolist() == [[5, 6, 7, 2], [10, 2, 0, 0]]
    assert batch.tgt_in.tolist() == [[1, 8, 9, 0], [1, 11, 12, 13]]
    assert batch.tgt_out.tolist() == [[8, 9, 2, 0], [11, 12, 13, 2]]
    assert batch.src.dtype == batch.tgt_in.dtype == batch.tgt_out.dtype == torch.long
    assert batch.indices == [4, 2]
    assert batch.n_tgt_tokens == 7


@pytest.mark.parametrize("rows", [[], [[]], [[], []], [[3], [], [4, 5, 6]], [[7, 8], [9, 10]]])
def test_padding_keeps_every_row_in_its_order(rows):
    padded = pad_sequences(rows, pad_id=99)
    width = max((len(r) for r in rows), default=0)
    assert padded.dtype == torch.long and tuple(padded.shape) == (len(rows), width)
    assert padded.tolist() == [r + [99] * (width - len(r)) for r in rows]


def test_padding_a_training_sized_batch_equals_row_by_row_copies():
    g = torch.Generator().manual_seed(5)
    rows = [torch.randint(3, 10_000, (int(n),), generator=g).tolist() for n in torch.randint(0, 40, (600,), generator=g)]
    expected = torch.zeros(600, max(map(len, rows)), dtype=torch.long)
    for i, row in enumerate(rows):
        expected[i, :len(row)] = torch.tensor(row, dtype=torch.long)
    assert torch.equal(pad_sequences(rows, pad_id=0), expected)


def test_dataset_drops_empty_and_overlong_pairs():
    ds = ParallelDataset([[1, 2], [], [3, 4, 5, 6], [7]], [[8], [9], [10], [11, 12, 13, 14, 15]], max_len=4)
    assert ds.kept == [0, 2]
    assert ds.dropped == 2
    assert ds[1] == ([3, 4, 5, 6], [10])
    assert ds.src_lengths() == [3, 5] and ds.tgt_lengths() == [2, 2]


def _lengths(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(1, 40, (n,), generator=g).tolist()
    tgt = torch.randint(1, 40, (n,), generator=g).tolist()
    return src, tgt


@pytest.mark.parametrize("max_tokens", [40, 100, 333, 1000])
def test_token_batches_respect_bound_and_cover_every_pair_once(max_tokens):
    src, tgt = _lengths(500)
    batches = token_batches(src, tgt, max_tokens, seed=3, epoch=1)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(500))
    for b in batches:
        assert len(b) * max(max(src[i] for i in b), max(tgt[i] for i in b)) <= max_tokens
    # Greedy packing: a batch is only closed when the next pair would not fit.
    assert len(batches) < 500


def test_token_batches_are_seeded_per_epoch():
    src, tgt = _lengths(300)
    a = token_batches(src, tgt, 200, seed=1, epoch=1)
    assert a == token_batches(src, tgt, 200, seed=1, epoch=1)
    assert a != token_batches(src, tgt, 200, seed=1, epoch=2)
    assert a != token_batches(src, tgt, 200, seed=2, epoch=1)
    # Unshuffled: pairs in length order.
    plain = token_batches([3, 1, 2], [3, 1, 2], 100, seed=1, epoch=1, shuffle=False)
    assert plain == [[1, 2, 0]]


def test_token_batches_reject_a_pair_larger_than_a_batch():
    with pytest.raises(ValueError, match="more than max_tokens=10"):
        token_batches([5, 11], [5, 5], 10, seed=1, epoch=1)


def test_read_parallel_reads_gzip_and_checks_alignment(tmp_path):
    for lang, lines in (("en", ["a b", " c "]), ("de", ["x", "y z"])):
        with gzip.open(tmp_path / f"train.{lang}.gz", "wt", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    assert read_parallel(tmp_path, "train", "en", "de") == (["a b", "c"], ["x", "y z"])
    assert read_parallel(tmp_path, "train", "en", "de", limit=1) == (["a b"], ["x"])
    (tmp_path / "val.en").write_text("1\n2\n")
    (tmp_path / "val.de").write_text("1\n")
    with pytest.raises(ValueError, match="2 en lines but 1 de lines"):
        read_parallel(tmp_path, "val", "en", "de")
    with pytest.raises(FileNotFoundError):
        read_parallel(tmp_path, "test", "en", "de")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("pinned", [True, False])
def test_a_batch_reaches_the_gpu_unchanged_either_way(pinned):
    batch = collate([([5, 6, 7], [8, 9]), ([10], [11, 12, 13])], indices=[4, 2])
    moved = batch.to("cuda", pinned=pinned)
    torch.cuda.synchronize()
    for name in ("src", "tgt_in", "tgt_out"):
        assert getattr(moved, name).is_cuda and torch.equal(getattr(moved, name).cpu(), getattr(batch, name))
    assert moved.indices == [4, 2] and not batch.src.is_pinned()  # the host batch itself is left as it was
