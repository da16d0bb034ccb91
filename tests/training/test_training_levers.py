"""The training speed levers keep the numbers: AdamW's implementations give the loss curve of the
default within a tenth of the seed-to-seed spread over 40 updates (benchmarks/training_levers.py runs the same
comparison for longer and for torch.compile), the recipe refuses an unknown implementation or compile mode,
and the training loop hands torch.compile the recipe's mode."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from training.loop import optimizer_kernels
from training.recipe import RecipeError, TrainingRecipe

REPO = Path(__file__).resolve().parents[2]


def _levers():
    spec = importlib.util.spec_from_file_location("training_levers", REPO / "benchmarks" / "training_levers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_optimizer_implementations_map_to_adamws_arguments():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert optimizer_kernels(TrainingRecipe(), cpu) == {"fused": False}
    assert optimizer_kernels(TrainingRecipe(), cuda) == {"fused": True}
    assert optimizer_kernels(TrainingRecipe(optimizer_implementation="fused"), cpu) == {"fused": True}
    assert optimizer_kernels(TrainingRecipe(optimizer_implementation="foreach"), cuda) == {"fused": False, "foreach": True}
    with pytest.raises(RecipeError) as error:
        TrainingRecipe.from_dict({"optimizer_implementation": "apex", "compile": "yes"})
    assert error.value.problems == ["compile must be true or false, got 'yes'",
                                    "optimizer_implementation must be one of auto, fused, foreach, got 'apex'"]


UPDATES = 40


@pytest.fixture(scope="module")
def curves():
    """The reference loss curve (AdamW's default on the CPU) and another seed's: what noise is."""
    levers = _levers()
    return levers, levers.loss_curve({}, "cpu", UPDATES), levers.loss_curve({"seed": 2}, "cpu", UPDATES)


@pytest.mark.parametrize("implementation", ["fused", "foreach"])
def test_the_optimizer_implementations_keep_the_loss_curve_within_noise(curves, implementation):
    levers, reference, other_seed = curves
    changed = levers.loss_curve({"optimizer_implementation": implementation}, "cpu", UPDATES)
    assert len(reference) == len(changed) == UPDATES // 10
    # The first interval differs by float rounding only; the whole curve stays far inside what
    # another seed changes (the drift of rounding differences, not a different trajectory).
    assert abs(reference[0] - changed[0]) <= 1e-4 * reference[0]
    seed_spread = max(abs(a - b) for a, b in zip(reference, other_seed))
    assert seed_spread > 0.01
    assert max(abs(a - b) for a, b in zip(reference, changed)) <= seed_spread / 10


def test_a_compiled_forward_gives_the_eager_losses():
    """The recipe key `compile` hands direction_loss a torch.compile'd module, which has no truth value:
    `forward or model` raised TypeError at the first update. Dynamo's eager backend traces the same way
    without generating code, so the check is quick; the losses equal the uncompiled module's."""
    from model.config import ModelConfig
    from model.transformer import Transformer
    from training.data import collate
    from training.validation import direction_loss

    torch.manual_seed(3)
    config = ModelConfig.from_dict({"d_model": 32, "n_heads": 2, "d_ff": 64, "encoder_layers": 1, "decoder_layers": 1,
                                    "dropout": 0.0, "vocab_size": 40, "pad_id": 0, "bos_id": 1, "eos_id": 2})
    model = Transformer(config).eval()
    batch = collate([([5, 6, 7], [8, 9]), ([10], [11, 12, 13])])
    eager = direction_loss(model, batch, batch.n_tgt_tokens, smoothing=0.1, amp=False)
    compiled = direction_loss(model, batch, batch.n_tgt_tokens, smoothing=0.1, amp=False,
                              forward=torch.compile(model, backend="eager"))
    torch.testing.assert_close(compiled.objective, eager.objective, rtol=0, atol=0)
    torch.testing.assert_close(compiled.xent.nll, eager.xent.nll, rtol=0, atol=0)


def test_the_recipe_refuses_a_compile_mode_it_does_not_know_or_without_compile():
    assert TrainingRecipe.from_dict({"compile": True, "compile_mode": "reduce-overhead"}).compile_mode == "reduce-overhead"
    with pytest.raises(RecipeError) as error:
        TrainingRecipe.from_dict({"compile": True, "compile_mode": "max-autotune"})
    assert error.value.problems == ["compile_mode must be one of default, reduce-overhead, got 'max-autotune'"]
    with pytest.raises(RecipeError) as error:
        TrainingRecipe.from_dict({"compile_mode": "reduce-overhead"})
    assert error.value.problems == ["compile_mode 'reduce-overhead' needs compile: true"]


def test_training_compiles_the_forward_pass_in_the_recipes_mode(monkeypatch):
    """Through the training loop (2 updates of recipes/smoke.json): torch.compile gets the recipe's mode and
    dynamic shapes; Dynamo's eager backend stands in for the compiler (the CUDA graphs of reduce-overhead
    exist only on a GPU: studies/gpu/speed.sh measures them), and the updates run on what it returns."""
    import training.loop

    calls, compile_ = [], torch.compile

    def compile_eagerly(module, **options):
        calls.append(options)
        return compile_(module, backend="eager")

    monkeypatch.setattr(training.loop.torch, "compile", compile_eagerly)
    losses = _levers().loss_curve({"compile": True, "compile_mode": "reduce-overhead", "log_interval": 1}, "cpu", 2)
    assert calls == [{"dynamic": True, "mode": "reduce-overhead"}]
    assert len(losses) == 2 and all(loss > 0 for loss in losses)
