"""Incremental decoding equals the full pass; padding and the future change nothing."""
import torch

from model.decoder_state import DecoderState, sentence_rows
from tests.helpers import assert_incremental_equals_full_pass, tiny_model
from tests.helpers import TINY_MODEL_OPS, assert_close_for

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
    assert_close_for(log_probs, reference[[1, 0]], ops=TINY_MODEL_OPS)


def test_source_padding_changes_nothing():
    model = tiny_model()
    alone = model(SRC[1:, :3], TGT_IN[1:, :3], need_attention=True)
    batched = model(SRC, TGT_IN, need_attention=True)
    assert_close_for(batched.logits[1:, :3], alone.logits, ops=TINY_MODEL_OPS)
    # Attention never lands on padding.
    assert batched.attention[1, :, 3:].abs().max().item() == 0.0
    assert_close_for(batched.attention[1:, :3, :3], alone.attention, ops=TINY_MODEL_OPS)


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
    assert_close_for(attention.sum(-1), torch.ones(2, 5), ops=TINY_MODEL_OPS)


def test_gradients_reach_every_parameter():
    model = tiny_model().train()
    logits = model(SRC, TGT_IN).logits
    logits.logsumexp(-1).sum().backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert missing == []


def test_the_state_names_its_per_sentence_tensors():
    model = tiny_model()
    state = model.init_state(model.encode(SRC))
    assert state.sentence == {"memory_pad_mask"} | {f"layers.{i}.cross.{n}" for i in range(2) for n in "kv"}
    after = model.decode_step(TGT_IN[:, 0], state).state
    # A step passes them through as they are, and counts the position.
    assert all(after.tensors[name] is state.tensors[name] for name in state.sentence)
    assert after.tensors["position"].tolist() == [1, 1] and state.tensors["position"].tolist() == [0, 0]


def test_a_beam_reorder_copies_only_per_beam_tensors_and_equals_copying_all():
    model = tiny_model()
    state = model.init_state(model.encode(SRC)).expand(3)  # 2 sentences x 3 beams, sentence-major
    state = model.decode_step(TGT_IN[:, 0].repeat_interleave(3), state).state
    same_groups = torch.tensor([1, 1, 0, 5, 3, 3])  # every beam stays with its sentence
    sentence_0_leaves = torch.tensor([4, 3, 3])
    for index in (same_groups, sentence_0_leaves, torch.tensor([5, 0, 2])):  # the last: no groups at all
        moved = state.reorder(index)
        assert {n: torch.equal(t, state.tensors[n].index_select(0, index)) for n, t in moved.tensors.items()} == \
            {n: True for n in moved.tensors}
    moved = state.reorder(same_groups)
    assert all(moved.tensors[n] is state.tensors[n] for n in state.sentence)
    assert all(moved.tensors[n] is not state.tensors[n] for n in set(state.tensors) - state.sentence)
    # A reordered state decodes as if every tensor had been copied.
    full = DecoderState({n: t.index_select(0, same_groups) for n, t in state.tensors.items()})
    tokens = torch.tensor([20, 21, 22, 23, 24, 25])
    assert torch.equal(model.decode_step(tokens, moved).log_probs, model.decode_step(tokens, full).log_probs)


def test_sentence_rows_keep_groups_or_fall_back_to_the_index():
    assert sentence_rows(torch.tensor([1, 0, 2, 2]), 2, 4) is None  # same groups: nothing to take
    assert sentence_rows(torch.tensor([3, 2]), 2, 4).tolist() == [2, 3]  # sentence 0 left
    assert sentence_rows(torch.tensor([3, 0]), 2, 4).tolist() == [3, 0]  # mixed groups: the index
    assert sentence_rows(torch.tensor([0, 1, 2]), 1, 3) is None
    assert sentence_rows(torch.tensor([2, 1]), 1, 3).tolist() == [2, 1]
