"""ONNX and TorchScript exports equal eager PyTorch: per step (log-probs, attention and every
state tensor, from the empty cache of step 0, through reorders that duplicate and drop rows, down
to one row), and end to end (the same beam search gives the same hypotheses)."""
from __future__ import annotations

import pytest
import torch

from model.artifacts import load_model_dir
from model.generate import SearchOptions, generate, pad_sources
from export.runners import open_runner
from tests.export.fixtures import MODEL_CONFIGS, exported, model_dir, sentences

TARGETS = ["onnx", "torchscript"]
ATOL = 1e-4  # fp32 log-probs and attention per step


def _close(a, b) -> float:
    a, b = torch.as_tensor(a).float(), torch.as_tensor(b).float()
    assert a.shape == b.shape
    return 0.0 if a.numel() == 0 else float((a - b).abs().max())


@pytest.mark.parametrize("config_id", list(MODEL_CONFIGS))
@pytest.mark.parametrize("target", TARGETS)
def test_every_step_equals_eager_decode_step(target, config_id, tmp_path_factory, tiny_spm):
    loaded = load_model_dir(model_dir(tmp_path_factory, tiny_spm, config_id))
    backend = open_runner(exported(tmp_path_factory, tiny_spm, target, config_id)).backend
    model, config = loaded.model, loaded.config
    ids = loaded.tokenizer.encode_batch(sentences(3))
    src = pad_sources([s + [config.eos_id] for s in ids], config.pad_id)  # three lengths: padding exercised
    with torch.inference_mode():
        eager = model.init_state(model.encode(src))
        state = backend.encode(src)
        assert list(state) == list(eager.tensors)
        assert all(_close(state[n], eager.tensors[n]) < ATOL for n in state)
        assert tuple(torch.as_tensor(state["layers.0.self.k"]).shape[2:3]) == (0,)  # step 0: an empty cache
        tokens = torch.full((3,), config.bos_id)
        # After step 1: rows (2, 0, 0) (a duplicate, a drop); after step 3: one row.
        reorders = {1: torch.tensor([2, 0, 0]), 3: torch.tensor([1])}
        for step in range(5):
            log_probs, attention, eager = model.decode_step(tokens, None, eager)
            got_log_probs, got_attention, state = backend.step(tokens, state)
            assert _close(got_log_probs, log_probs) < ATOL, step
            assert _close(got_attention, attention) < ATOL, step
            assert {n: _close(state[n], eager.tensors[n]) < ATOL for n in state} == {n: True for n in state}
            tokens = log_probs.argmax(dim=-1)
            if step in reorders:
                index = reorders[step]
                eager, state, tokens = eager.reorder(index), backend.reorder(state, index), tokens[index]


@pytest.mark.parametrize("config_id", list(MODEL_CONFIGS))
@pytest.mark.parametrize("target", TARGETS)
def test_beam_search_gives_the_same_hypotheses(target, config_id, tmp_path_factory, tiny_spm):
    loaded = load_model_dir(model_dir(tmp_path_factory, tiny_spm, config_id))
    runner = open_runner(exported(tmp_path_factory, tiny_spm, target, config_id))
    ids = loaded.tokenizer.encode_batch(sentences(12))
    options = SearchOptions(beam_size=3, n_best=3, max_length_ratio=1.5, max_length_offset=10, return_attention=True)
    eager = generate(loaded.model, pad_sources([s + [loaded.config.eos_id] for s in ids], loaded.config.pad_id), options)
    got = runner.generate(ids, options)
    assert [[h.tokens for h in nbest] for nbest in got] == [[h.tokens for h in nbest] for nbest in eager]
    for nbest_got, nbest_eager in zip(got, eager):
        for a, b in zip(nbest_got, nbest_eager):
            assert a.score == pytest.approx(b.score, abs=ATOL)
            assert _close(a.attention, b.attention) < ATOL
    # Not a degenerate case: hypotheses of several lengths, none cut at the limit.
    lengths = {len(h.tokens) for nbest in eager for h in nbest}
    assert len(lengths) > 3
