"""What an n-gram attention module may keep across the calls of a search (model/attention/functional.py
`inference_constants_allowed`): QueryK's scatter indices, which depend on its constant structure and
the keys' length alone. Kept, a step computes the same numbers bit for bit and dispatches fewer
operators; training and tracing keep nothing; and nothing computed from the parameters is kept, so
a parameter changed in place, even through `.data` (which no version counter sees), counts at once."""
import collections

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from model.attention.convkv import ConvKVAttention
from model.attention.queryk import QueryKAttention

pytestmark = pytest.mark.usefixtures("one_thread")

HETEROGENEOUS = {"structure": "heterogeneous", "ngrams": [1, 2, 3]}


class Operators(TorchDispatchMode):
    """The aten operators dispatched, views left out: a kernel each."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        returns = func._schema.returns
        if not (returns and returns[0].alias_info is not None and not returns[0].alias_info.is_write):
            self.count += 1
        return func(*args, **(kwargs or {}))


class FullPass(torch.nn.Module):
    def __init__(self, attention):
        super().__init__()
        self.attention = attention

    def forward(self, x):
        return self.attention(x, causal=True).out


def decoder_self(kind=QueryKAttention, seed=0):
    torch.manual_seed(seed)
    return kind(8, 2, 0.0, "decoder_self", HETEROGENEOUS).eval()


def steps(module, rows, grad=False):
    """The module's incremental steps over rows (1, T, 8): outputs and each step's operator count."""
    state = module.init_state(None, 1, rows.device, rows.dtype)
    outs, counts = [], []
    with torch.set_grad_enabled(grad):
        for t in range(rows.shape[1]):
            with Operators() as ops:
                out = module.step(rows[:, t : t + 1], state)
            state = out.state
            outs.append(out.out.detach())
            counts.append(ops.count)
    return outs, counts


def test_kept_indices_give_the_same_numbers_for_fewer_operators():
    module, rows = decoder_self(), torch.randn(1, 4, 8)
    first, first_counts = steps(module, rows)
    made, made_counts = steps(decoder_self(), rows, grad=True)  # with a gradient: made at every step
    assert all(torch.equal(a, b) for a, b in zip(first, made))
    # A first search meets every key length anew and makes its indices as a step with a gradient does;
    # a second search at those lengths makes none: add, arange, add fewer a step (one head group).
    assert first_counts == made_counts
    again, again_counts = steps(module, rows)
    assert all(torch.equal(a, b) for a, b in zip(again, made))
    assert [m - k for m, k in zip(made_counts, again_counts)] == [3, 3, 3, 3]


def test_a_parameter_changed_through_data_counts_at_once():
    module, rows = decoder_self(), torch.randn(1, 3, 8)
    steps(module, rows)
    with torch.no_grad():
        module.values[0][1].weight.data.view(-1)[0] += 0.25  # the bigram value kernel: no version bump
        module.k_proj.bias.data.mul_(2.0)
    fresh = decoder_self()
    fresh.load_state_dict(module.state_dict())
    changed, _ = steps(module, rows)
    want, _ = steps(fresh, rows, grad=True)
    assert all(torch.equal(a, b) for a, b in zip(changed, want))


@pytest.mark.parametrize("kind", [QueryKAttention, ConvKVAttention])
def test_training_and_tracing_keep_nothing(kind):
    module, rows = decoder_self(kind), torch.randn(1, 3, 8)
    steps(module.train(), rows, grad=True)
    assert module._derived == {}
    module.eval()
    with torch.no_grad():
        torch.jit.trace(FullPass(module), (rows,), check_trace=False)
    assert module._derived == {}
    steps(module, rows)
    assert bool(module._derived) == (kind is QueryKAttention)  # ConvKV has nothing to keep


def test_indices_are_made_anew_when_their_buffers_are_replaced():
    # A move to another device replaces a module's buffers (new storage): what was kept is made again.
    module, rows = decoder_self(), torch.randn(1, 3, 8)
    steps(module, rows)
    kept = {key: value[1] for key, value in module._derived.items()}
    steps(module, rows)
    assert all(module._derived[key][1] is tensor for key, tensor in kept.items())  # same storage: kept
    module.rows_size_0 = module.rows_size_0.clone()
    steps(module, rows)
    assert all(module._derived[key][1] is not tensor for key, tensor in kept.items())
