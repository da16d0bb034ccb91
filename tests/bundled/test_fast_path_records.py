"""Every bundled model's verification records apply to it as it is committed: the kernels record
(float32 through the C kernels) and the int8 record (int8 through the kernels, what the service
serves on a CPU by default). A record that no longer applies (other weights, a scheme string
changed with the code) makes the service fall back to a slower path with only a log line, so it is
caught here instead. After a change of scheme, rerun the command the failure names."""
from __future__ import annotations

import pytest

from export import int8_check, kernels_check
from model.decoding.kernel_backend import KERNELS
from model.model_dir import load_model_dir
from tests.bundled.expectations import REPO

BUNDLED = sorted(path.name for path in (REPO / "models").iterdir() if (path / "config.json").is_file())


def test_the_seven_bundled_models_are_checked():
    assert BUNDLED == ["de-en-align", "de-en-software", "en-de", "en-de-align", "en-de-align2", "en-de-software", "en-fr"]


@pytest.mark.parametrize("name", BUNDLED)
def test_records_apply(name):
    path = REPO / "models" / name
    loaded = load_model_dir(path, device="cpu")
    assert kernels_check.record_problem(path, loaded) is None
    assert int8_check.record_problem(path, loaded, KERNELS) is None


# de-en-software's int8 record failed before its fine-tuning with the identical pairs (BLEU 36.03 -> 35.73 on
# its validation split, the limit 0.3) and passes since (35.74 -> 35.91).
@pytest.mark.parametrize("name", ["en-de-align2", "en-de-software", "de-en-align", "de-en-software", "en-fr"])
def test_the_default_serves_int8_through_the_kernels(name):
    from model.decoding.kernel_backend import kernel_decoding_problem
    from service.runtime.factory import RuntimeSpec, load_runtime

    if kernel_decoding_problem(load_model_dir(REPO / "models" / name, device="cpu").model) is not None:
        pytest.skip("the CPU kernels do not build here")  # int8 records name the kernels decoder
    runtime = load_runtime(RuntimeSpec("torch", REPO / "models" / name, "cpu"))
    assert (runtime.precision, runtime.step_backend) == ("int8", "kernels")
    assert runtime.loaded.model is runtime.model  # the float32 weights are not kept beside the int8 ones
