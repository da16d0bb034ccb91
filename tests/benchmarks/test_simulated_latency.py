"""The simulated batch latency of the load benchmark (benchmarks/simulated_latency.py): the curve
by hand, the simulated server's option, and the simulated runtime sleeping by it."""
import pytest

from benchmarks import simulated_server
from benchmarks.simulated_latency import BatchLatency, SimulatedRuntime
from service.runtime.base import DecodingOptions
from testing import fake_runtime

H100 = BatchLatency.parse("1:71.4,8:110.4,64:150.7")  # results/decode_cuda.md, ms per batch


@pytest.mark.parametrize("size, ms", [
    (1, 71.4), (0, 71.4),  # below the first point: its value
    (8, 110.4), (4, 71.4 + 3 * 39.0 / 7),  # linear between points
    (36, 110.4 + 28 * 40.3 / 56), (64, 150.7),
    (128, 150.7 + 64 * 40.3 / 56),  # beyond the last point: the last slope
])
def test_the_curve_is_linear_between_points_and_continues_the_last_slope(size, ms):
    assert H100.seconds(size) == pytest.approx(ms / 1000, abs=1e-12)


def test_one_point_is_a_constant_and_points_need_not_be_sorted():
    assert BatchLatency({4: 10.0}).seconds(100) == 0.01
    assert BatchLatency({64: 150.7, 1: 71.4}).seconds(8) == pytest.approx(BatchLatency.parse("1:71.4,64:150.7").seconds(8))


@pytest.mark.parametrize("text, message", [
    ("1:71.4,8", "batch latency: '8' is not SIZE:MS (e.g. 1:71.4,64:150.7)"),
    ("a:3", "batch latency: 'a:3' is not SIZE:MS (e.g. 1:71.4,64:150.7)"),
    ("0:3,2:-1", "batch latency points need batch size >= 1 and 0 <= ms < 60000, got 0: 3.0, 2: -1.0"),
])
def test_bad_curves_are_refused_naming_the_point(text, message):
    with pytest.raises(ValueError) as error:
        BatchLatency.parse(text)
    assert str(error.value) == message


def test_the_simulated_server_refuses_a_bad_curve_in_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        simulated_server.main(["--latency", "0:1", "--port", "9123"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "benchmarks/simulated_server.py: error: --latency: batch latency points need batch size >= 1 "
        "and 0 <= ms < 60000, got 0: 1.0"
    )


def test_the_simulated_runtime_sleeps_by_the_curve_for_its_batch_size(monkeypatch):
    slept = []
    monkeypatch.setattr(fake_runtime.time, "sleep", slept.append)
    runtime = SimulatedRuntime("en", "de", H100)
    assert runtime.translate(["a b"] * 8, DecodingOptions()) == fake_runtime.FakeRuntime().translate(["a b"] * 8, DecodingOptions())
    runtime.translate(["a b"], DecodingOptions())
    assert slept == [pytest.approx(0.1104), pytest.approx(0.0714)]
