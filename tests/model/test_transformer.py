"""Incremental decoding equals the full pass; padding and the future change nothing."""
import torch

from tests.helpers import assert_incremental_equals_full_pass, tiny_model

SRC = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
TGT_IN = torch.tensor([[1, 11, 12, 13, 14], [1, 15, 16, 0, 0]])


def test_incremental_decoding_equals_full_pass():
    assert_incremental_equals_full_pass(tiny_model(), SRC, TGT_IN)


def test_state_reorder_follows_rows():
    model = tiny_model()
    state = model.init_state(model.encode(SRC))
    state = model.decode_step(TGT_IN[:, 0], state).state
    swapped = state.reorder(torch.tensor([1, 0]))
    log_probs = model.decode_step(TGT_IN[[1, 0], 1], swapped).log_probs
    reference = model.decode_step(TGT_IN[:, 1], state).log_probs
    torch.testing.assert_close(log_probs, reference[[1, 0]], atol=1e-6, rtol=0)


def test_source_padding_changes_nothing():
    model = tiny_model()
    alone = model(SRC[1:, :3], TGT_IN[1:, :3], need_attention=True)
    batched = model(SRC, TGT_IN, need_attention=True)
    torch.testing.assert_close(batched.logits[1:, :3], alone.logits, atol=1e-5, rtol=0)
    # Attention never lands on padding.
    assert batched.attention[1, :, 3:].abs().max().item() == 0.0
    torch.testing.assert_close(batched.attention[1:, :3, :3], alone.attention, atol=1e-5, rtol=0)


def test_future_target_tokens_change_nothing():
    model = tiny_model()
    changed = TGT_IN.clone()
    changed[:, 3:] = 20
    a = model(SRC, TGT_IN).logits
    b = model(SRC, changed).logits
    torch.testing.assert_close(a[:, :3], b[:, :3], atol=0, rtol=0)
    assert not torch.allclose(a[:, 3:], b[:, 3:])


def test_attention_rows_are_distributions_over_real_tokens():
    model = tiny_model()
    attention = model(SRC, TGT_IN, need_attention=True).attention
    torch.testing.assert_close(attention.sum(-1), torch.ones(2, 5), atol=1e-5, rtol=0)


def test_gradients_reach_every_parameter():
    model = tiny_model().train()
    logits = model(SRC, TGT_IN).logits
    logits.logsumexp(-1).sum().backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert missing == []
