"""The static search over a compiled step (model/decoding/compiled_step.py) decodes what it decodes
over the eager step: Dynamo traces the step as it does for inductor (its state, its options, dynamic
batch, width and step count) and a backend that runs the traced operations as they are stands in for
inductor, so the hypotheses are the same bit for bit and the traces can be counted; what inductor's
fused kernels change is float rounding, measured by `benchmarks/engines.py --engines
torch-static,torch-static-compiled` (agreement column)."""
import pytest
import torch

from model.decoding.compiled_step import CompiledStepBackend
from model.decoding.generate import generate
from model.decoding.static_decoding import StaticGenerator
from tests.model.test_static_decoding import SRC, assert_same_hypotheses, family_model, options_for

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("name", ["vanilla", "queryk-heterogeneous-1-2-3", "phrase-representation",
                                  "supervised-head-added"])
def test_the_static_search_over_a_compiled_step_is_the_static_search(name):
    torch._dynamo.reset()
    graphs = []

    def traced(graph, example_inputs):  # Dynamo's eager backend, counting what it is handed
        graphs.append(graph)
        return graph.forward

    model = family_model(name, seed=3)
    options = options_for(model, 5)
    expected = generate(StaticGenerator(model), SRC, options)
    compiled = StaticGenerator(CompiledStepBackend(model, compiler=traced))
    assert_same_hypotheses(expected, generate(compiled, SRC, options), ops=0)
    traced_once = len(graphs)
    assert 1 <= traced_once <= 4  # the first step (empty caches) and the later ones, each traced whole
    # A batch of another size and width reuses the traced steps (dynamic shapes: no tracing per bucket).
    again = SRC[:1, :2]
    assert_same_hypotheses(generate(StaticGenerator(model), again, options), generate(compiled, again, options), ops=0)
    assert len(graphs) == traced_once
