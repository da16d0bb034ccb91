"""The one-kernel recurrent bias softmax (model/biases/recurrence_kernel.py) against the PyTorch step
loop it replaces on CUDA: probabilities and every gradient (logits, both window weights), with
padding, an empty source row, each term alone and both, windows 0-2. Run in Triton's interpreter,
which executes the same kernel code on the CPU."""
import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before Triton reads its settings at the first kernel

import pytest
import torch

pytest.importorskip("triton")

from model.biases import recurrence_kernel  # noqa: E402
from tests.helpers import randomise_biases, tiny_model  # noqa: E402


CASES = {
    "markov": (1, None),
    "fertility": (None, 2),
    "both": (1, 1),
    "markov-window-0": (0, None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_probabilities_and_gradients_equal_the_step_loop(name):
    k_prev, k_cov = CASES[name]
    torch.manual_seed(3)
    b, h, t, s = 3, 2, 6, 5
    logits = (2 * torch.randn(b, h, t, s, dtype=torch.float64)).float()
    hidden = torch.tensor([[False] * 5, [False, False, False, True, True], [True] * 5])  # row 2: empty source
    w_prev = None if k_prev is None else torch.randn(h, 2 * k_prev + 1)
    w_cov = None if k_cov is None else torch.randn(h, 2 * k_cov + 1)
    upstream = torch.randn(b, h, t, s)

    def run(fn):
        leaves = [logits.clone().requires_grad_()] + [None if w is None else w.clone().requires_grad_() for w in (w_prev, w_cov)]
        probs = fn(leaves[0], hidden, leaves[1], leaves[2])
        (probs * upstream).sum().backward()
        return probs.detach(), [None if x is None else x.grad for x in leaves]

    expected, expected_grads = run(recurrence_kernel.loop_softmax)
    probs, grads = run(recurrence_kernel.recurrent_softmax)
    torch.testing.assert_close(probs, expected, rtol=1e-5, atol=1e-6)
    assert probs[2].abs().max() == 0  # nothing to attend: zeros, as masked_softmax gives
    assert probs[1, :, :, 3:].abs().max() == 0
    for got, want in zip(grads, expected_grads):
        assert (got is None) == (want is None)
        if want is not None:
            assert want.abs().max() > 1e-3  # the gradient is there to compare
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_the_model_takes_the_kernel_where_wanted(monkeypatch):
    """A whole biased model (position, Markov, fertility, recurrent): the kernel path's forward and
    parameter gradients equal the step loop's."""
    biases = {"position": {}, "markov": {"window": 1, "form": "recurrent"}, "fertility": {"window": 1, "form": "recurrent"}}
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    tgt = torch.tensor([[1, 11, 12, 13, 14], [1, 15, 16, 0, 0]])

    def run(kernel: bool):
        model = randomise_biases(tiny_model(seed=1, alignment_biases=biases), 1)
        calls = []
        real = recurrence_kernel.recurrent_softmax

        def counted(*args):
            calls.append(1)
            return real(*args)

        monkeypatch.setattr(recurrence_kernel, "wanted", lambda logits: kernel)
        monkeypatch.setattr(recurrence_kernel, "recurrent_softmax", counted)
        out = model(src, tgt, need_attention=True)
        out.logits.float().sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        return out.attention.detach(), grads, len(calls)

    attention, grads, calls = run(kernel=False)
    kernel_attention, kernel_grads, kernel_calls = run(kernel=True)
    assert (calls, kernel_calls) == (0, tiny_model(seed=1).config.decoder_layers)
    torch.testing.assert_close(kernel_attention, attention, rtol=1e-5, atol=1e-6)
    assert set(kernel_grads) == set(grads)
    assert any("markov" in n for n in grads) and any("fertility" in n for n in grads)
    for name in grads:
        torch.testing.assert_close(kernel_grads[name], grads[name], rtol=1e-4, atol=1e-5, msg=name)


def test_the_loop_reference_is_the_models_step_loop():
    """loop_softmax is what BiasedCrossAttention computes without the kernel: the same numbers."""
    biases = {"markov": {"window": 1, "form": "recurrent"}, "fertility": {"window": 2, "form": "recurrent"}}
    model = randomise_biases(tiny_model(seed=2, alignment_biases=biases), 2)
    cross = model.decoder_layers[0].cross_attention
    torch.manual_seed(0)
    logits = torch.randn(2, model.config.n_heads, 5, 4)
    mask = torch.tensor([[False] * 4, [False, False, True, True]])
    lengths = (~mask).sum(-1)
    expected = cross._recurrent_probs(logits, mask, lengths)
    got = recurrence_kernel.loop_softmax(logits, mask, cross.biases["markov"].weight, cross.biases["fertility"].weight)
    assert torch.equal(got, expected)


def test_the_kernels_pass_their_own_check_where_they_run():
    """The check `wanted` makes once per device before the kernels train anything (here in the
    interpreter); a kernel that fails it is not used."""
    recurrence_kernel.verified.cache_clear()
    assert recurrence_kernel.verified(torch.device("cpu"))


def test_a_kernel_that_fails_its_check_is_not_used(monkeypatch):
    recurrence_kernel.verified.cache_clear()
    monkeypatch.setattr(recurrence_kernel, "recurrent_softmax", lambda logits, *rest: torch.softmax(logits, -1))
    try:
        assert not recurrence_kernel.verified(torch.device("cpu"))
    finally:
        recurrence_kernel.verified.cache_clear()


def test_off_switch_and_cpu_keep_the_loop(monkeypatch):
    recurrence_kernel.available.cache_clear()
    monkeypatch.setenv(recurrence_kernel.ENV, "off")
    try:
        assert not recurrence_kernel.available()
        assert not recurrence_kernel.wanted(torch.zeros(1, 1, 1, 1))
    finally:
        recurrence_kernel.available.cache_clear()
    monkeypatch.delenv(recurrence_kernel.ENV)
    assert recurrence_kernel.available()
    assert not recurrence_kernel.wanted(torch.zeros(1, 1, 1, 1))  # CPU tensors: the loop


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_the_check_holds_when_the_first_pass_takes_no_gradients(mode):
    """The first full pass of a process may be a validation or a forced alignment: the check still
    compares gradients, instead of failing on the caller's mode and switching the kernels off."""
    recurrence_kernel.verified.cache_clear()
    try:
        with getattr(torch, mode)():
            assert recurrence_kernel.verified(torch.device("cpu"))
    finally:
        recurrence_kernel.verified.cache_clear()


def test_the_kernel_follows_the_papers_recurrence_by_hand():
    """Cohn et al. §3.2–§3.3 with zero content logits, computed in plain Python lists
    (tests/model/test_alignment_bias_features.py `hand_recurrence`): α_t = softmax(ξ₁(α_{t-1}) +
    ξ₂(Σ_{t'<t} α_{t'})), for a 5-token source and a 3-token one padded to 5."""
    from tests.model.test_alignment_bias_features import FERTILITY_W, MARKOV_W, hand_recurrence

    heads, steps = 2, 4
    w_prev = torch.tensor(MARKOV_W).expand(heads, 3).contiguous()
    w_cov = torch.tensor(FERTILITY_W).expand(heads, 3).contiguous()
    hidden = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    probs = recurrence_kernel.recurrent_softmax(torch.zeros(2, heads, steps, 5), hidden, w_prev, w_cov)
    for t in range(steps):
        long = torch.tensor(hand_recurrence(5, steps, MARKOV_W, FERTILITY_W)[t])
        short = torch.tensor(hand_recurrence(3, steps, MARKOV_W, FERTILITY_W)[t] + [0.0, 0.0])
        torch.testing.assert_close(probs[0, :, t], long.expand(heads, 5), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(probs[1, :, t], short.expand(heads, 5), rtol=1e-5, atol=1e-6)
