"""Several training processes, one model: torch.distributed under `torchrun`.

    torchrun --nproc_per_node 4 -m training train --recipe R --out runs/NAME          # 4 GPUs, one machine
    torchrun --nnodes 2 --node_rank 0 --nproc_per_node 8 --rdzv_backend c10d \
        --rdzv_endpoint HOST:29500 -m training train --recipe R --out runs/NAME        # and node_rank 1 on the other

A process started by torchrun (WORLD_SIZE > 1 in its environment) joins the process group (NCCL on
CUDA, gloo on the CPU), takes the GPU of its LOCAL_RANK, and wraps the model in
DistributedDataParallel, which averages the gradients over the processes in its backward pass.
Every process builds the same batch list (same seed and epoch) and update u takes the
`world × accumulate` batches that follow the previous update's: process r trains batches
r, r + world, …, so the effective batch is the same whatever the split between processes and
accumulation steps. Rank 0 alone writes the run directory (recipe, SentencePiece model, log,
checkpoints, model dir); the others wait for it where they need its files.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class ProcessGroup:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world > 1

    def barrier(self) -> None:
        if self.active:
            dist.barrier()

    def sum(self, values: list[float]) -> list[float]:
        """The element-wise sum over every process (float64 on the CPU: counts stay exact)."""
        if not self.active:
            return values
        t = torch.tensor(values, dtype=torch.float64)
        if dist.get_backend() == "nccl":
            t = t.cuda()
        dist.all_reduce(t)
        return t.cpu().tolist()

    def close(self) -> None:
        if self.active and dist.is_initialized():
            dist.destroy_process_group()


SINGLE = ProcessGroup()


def join_from_environment(device: torch.device) -> tuple[ProcessGroup, torch.device]:
    """The process group torchrun describes in the environment (or the single process), and this
    process's device: CUDA processes take the GPU of their local rank."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return SINGLE, device
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return ProcessGroup(rank, world, local_rank), device


def wrap(module: torch.nn.Module, group: ProcessGroup) -> torch.nn.Module:
    """DistributedDataParallel over `module` when there are several processes, else `module`."""
    if not group.active:
        return module
    return torch.nn.parallel.DistributedDataParallel(module)


@contextlib.contextmanager
def gradient_sync(replicated: torch.nn.Module | None, sync: bool) -> Iterator[None]:
    """Accumulation steps before an update's last one keep their gradients local (DDP's no_sync).
    `replicated`: the DistributedDataParallel wrapper, None in a single process."""
    if sync or replicated is None:
        yield
    else:
        with replicated.no_sync():
            yield


def shard(batches: list, start: int, group: ProcessGroup, accumulate: int) -> list:
    """This process's batches of the update that starts at `start` in the epoch's batch list."""
    return [batches[start + k * group.world + group.rank] for k in range(accumulate)]
