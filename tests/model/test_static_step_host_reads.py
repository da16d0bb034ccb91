"""A static decoding step (model/decoding/static_decoding.py `StaticDecoder.run_step`) reads nothing back
to the host and builds no tensor from host data: on CUDA either would synchronise the GPU at
every step, and neither can be captured in a CUDA graph. Checked on CPU by recording the
operations a step runs; on CUDA also under torch's own sync debug mode."""
import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from model.decoding.generate import generate
from model.decoding.static_decoding import StaticGenerator
from tests.model.test_static_decoding import FAMILIES, SRC, family_model, options_for

pytestmark = pytest.mark.usefixtures("one_thread")

# Tensor methods that hand a value to Python, or move a tensor to the host.
HOST_METHODS = {"item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__", "__len__"}
# aten ops that wait for the device: a value read back, or an output size known only from the data;
# lift_fresh is a tensor made from host data (torch.tensor, a Python list as an index).
SYNCING_OPS = {"_local_scalar_dense", "nonzero", "equal", "masked_select", "lift_fresh", "unique_dim",
               "_unique2", "unique_consecutive", "bincount", "repeat_interleave"}




class MethodRecorder(TorchFunctionMode):
    def __init__(self, found: list[str]):
        super().__init__()
        self.found = found

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        if name in HOST_METHODS or (name == "to" and any(str(a) == "cpu" for a in [*args[1:], *(kwargs or {}).values()])):
            self.found.append(f"Tensor.{name}")
        return func(*args, **(kwargs or {}))


class OpRecorder(TorchDispatchMode):
    def __init__(self, found: list[str]):
        super().__init__()
        self.found = found

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        op = func.overloadpacket.__name__
        boolean_index = op in ("index", "index_put", "index_put_") and any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] if len(args) > 1 else ()) or ())
        if op in SYNCING_OPS or boolean_index:
            self.found.append(f"aten.{op}")
        return func(*args, **(kwargs or {}))


def host_reads(fn) -> list[str]:
    found: list[str] = []
    with MethodRecorder(found), OpRecorder(found):
        fn()
    return found


def test_the_recorder_sees_host_reads():
    x = torch.arange(4.0)
    assert host_reads(lambda: x.sum().item()) == ["Tensor.item", "aten._local_scalar_dense"]
    assert host_reads(lambda: bool(x.any())) == ["Tensor.__bool__", "aten._local_scalar_dense"]
    assert host_reads(lambda: x[x > 1]) == ["aten.index"]
    assert host_reads(lambda: x[[0, 1]]) == ["aten.lift_fresh"]
    assert host_reads(lambda: x.index_select(0, torch.arange(2)).add_(1)) == []
    with torch.inference_mode():  # as steps run: the method is still seen (the scalar op is not dispatched then)
        assert host_reads(lambda: x.max().item()) == ["Tensor.item"]
        assert host_reads(lambda: bool(x.any())) == ["Tensor.__bool__"]
        assert host_reads(lambda: x.nonzero()) == ["aten.nonzero"]


def stepped_decoder(name: str, beam: int):
    """A decoder of the family after one search: its buffers allocated and filled (a step's
    inputs are whatever the search left; what matters here is which operations run)."""
    model = family_model(name, seed=3)
    options = options_for(model, beam)
    static = StaticGenerator(model)
    generate(static, SRC, options)
    return next(iter(static.decoders.values()))


@pytest.mark.parametrize("name", list(FAMILIES))
def test_a_static_step_reads_nothing_back(name):
    decoder = stepped_decoder(name, beam=3)
    with torch.inference_mode():
        assert host_reads(lambda: decoder.run_step(2)) == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch's sync debug mode needs a CUDA device (CPU covered above)")
@pytest.mark.parametrize("name", ["vanilla", "queryk-interleaved", "alignment-biases", "phrase-representation"])
def test_a_static_step_does_not_synchronise_cuda(name):
    model = family_model(name, seed=3).cuda()
    options = options_for(model, 3)
    static = StaticGenerator(model)
    generate(static, SRC.cuda(), options)
    decoder = next(iter(static.decoders.values()))
    torch.cuda.set_sync_debug_mode("error")
    try:
        with torch.inference_mode():
            decoder.run_step(2)
    finally:
        torch.cuda.set_sync_debug_mode("default")
