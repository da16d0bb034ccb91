"""Label-smoothed cross-entropy against a hand-computed value."""
import math

import torch

from training.losses import label_smoothed_loss
from tests.helpers import HAND_FORMULA_OPS, TINY_MODEL_OPS, assert_close_for


def test_label_smoothed_loss_matches_hand_formula():
    # One sentence, two real target tokens and one pad; vocabulary of 3.
    logits = torch.tensor([[[0.0, math.log(2.0), math.log(5.0)],
                            [math.log(3.0), 0.0, 0.0],
                            [9.0, -9.0, 4.0]]])  # (1, 3, 3)
    target = torch.tensor([[2, 1, 0]])  # the last position is padding
    eps = 0.1
    # softmax rows: [1, 2, 5] / 8 and [3, 1, 1] / 5
    p1 = [1 / 8, 2 / 8, 5 / 8]
    p2 = [3 / 5, 1 / 5, 1 / 5]
    nll = (-math.log(p1[2]) - math.log(p2[1])) / 2
    smooth = (-sum(math.log(p) for p in p1) / 3 - sum(math.log(p) for p in p2) / 3) / 2
    expected = (1 - eps) * nll + eps * smooth

    out = label_smoothed_loss(logits, target, smoothing=eps, pad_id=0)
    assert out.n_tokens == 2
    assert_close_for(out.loss, expected, ops=TINY_MODEL_OPS)
    assert_close_for(out.nll, nll, ops=TINY_MODEL_OPS)
    assert not out.nll.requires_grad


def test_padding_does_not_change_the_loss():
    torch.manual_seed(0)
    logits = torch.randn(1, 2, 7, requires_grad=True)
    target = torch.tensor([[3, 4]])
    padded_logits = torch.cat([logits, torch.randn(1, 3, 7)], dim=1)
    padded_target = torch.tensor([[3, 4, 0, 0, 0]])
    a = label_smoothed_loss(logits, target, smoothing=0.1)
    b = label_smoothed_loss(padded_logits, padded_target, smoothing=0.1, n_tokens=2)
    assert torch.equal(a.loss, b.loss)
    # The gradient with respect to the real positions is the same too, and none reaches padding.
    (grad_a,) = torch.autograd.grad(a.loss, logits)
    (grad_b,) = torch.autograd.grad(b.loss, padded_logits)
    assert_close_for(grad_b[:, :2], grad_a, ops=HAND_FORMULA_OPS)
    assert torch.equal(grad_b[:, 2:], torch.zeros(1, 3, 7))
