"""Checkpoint save/load, pruning and parameter averaging."""
import random

import torch

from training import checkpoints as ckpt
from training.schedule import inverse_sqrt_schedule


def _save(tmp_path, step, fill):
    model = torch.nn.Linear(2, 3)
    with torch.no_grad():
        model.weight.fill_(fill)
        model.bias.copy_(torch.tensor([fill, 2 * fill, -fill]))
    model.register_buffer("count", torch.tensor(7))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    scheduler = inverse_sqrt_schedule(optimizer, 4)
    return ckpt.save_checkpoint(tmp_path / ckpt.checkpoint_name(step), model=model, optimizer=optimizer,
                                scheduler=scheduler, step=step, epoch=1, batch_in_epoch=step,
                                config={"vocab_size": 3}, recipe={"name": "t"})


def test_average_equals_elementwise_mean(tmp_path):
    paths = [_save(tmp_path, step, fill) for step, fill in ((10, 1.0), (20, 2.0), (30, 6.0))]
    averaged = ckpt.average_checkpoints(paths)
    assert torch.equal(averaged["weight"], torch.full((3, 2), 3.0))
    assert torch.equal(averaged["bias"], torch.tensor([3.0, 6.0, -3.0]))
    assert averaged["count"].item() == 7 and averaged["count"].dtype == torch.long
    # Real-valued tensors: the mean of three random states, to float32 precision.
    states = []
    for i, step in enumerate((40, 50, 60)):
        torch.manual_seed(i)
        model = torch.nn.Linear(4, 4)
        states.append({k: v.clone() for k, v in model.state_dict().items()})
        optimizer = torch.optim.Adam(model.parameters())
        ckpt.save_checkpoint(tmp_path / ckpt.checkpoint_name(step), model=model, optimizer=optimizer,
                             scheduler=inverse_sqrt_schedule(optimizer, 2), step=step, epoch=1,
                             batch_in_epoch=0, config={}, recipe={})
    averaged = ckpt.average_checkpoints(ckpt.list_checkpoints(tmp_path)[-3:])
    for name in ("weight", "bias"):
        expected = (states[0][name].double() + states[1][name].double() + states[2][name].double()) / 3
        assert torch.equal(averaged[name], expected.float())


def test_checkpoint_round_trip_is_weights_only(tmp_path):
    random.seed(5)
    path = _save(tmp_path, 12, 0.5)
    expected_python = random.random()
    random.seed(99)
    payload = ckpt.load_checkpoint(path)  # torch.load(weights_only=True) inside
    assert payload["step"] == 12 and payload["epoch"] == 1 and payload["batch_in_epoch"] == 12
    assert payload["config"] == {"vocab_size": 3} and payload["recipe"] == {"name": "t"}
    assert payload["scheduler"]["lr_lambdas"] == [{"warmup": 4}]
    ckpt.restore_rng_states(payload["rng"])
    assert random.random() == expected_python


def test_list_and_prune_keep_the_newest(tmp_path):
    for step in (5, 100, 20, 7):
        _save(tmp_path, step, 1.0)
    (tmp_path / "other.pt").write_bytes(b"")
    assert [ckpt.checkpoint_step(p) for p in ckpt.list_checkpoints(tmp_path)] == [5, 7, 20, 100]
    removed = ckpt.prune_checkpoints(tmp_path, keep_last=2)
    assert [ckpt.checkpoint_step(p) for p in removed] == [5, 7]
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == ["checkpoint_0000020.pt", "checkpoint_0000100.pt"]
    assert (tmp_path / "other.pt").exists()
