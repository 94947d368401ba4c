"""Which process this is under torchrun, and the few collectives training and evaluation need: one
``is_main()`` instead of scattered ``if rank == 0``; every helper is a no-op when the process runs alone,
so the same code runs with and without torchrun. ``engine.distributed`` joins the process group."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


_INFO = DistInfo()


def set_info(new: DistInfo) -> DistInfo:
    """Record this process's place (``engine.distributed.init_distributed`` calls it once)."""
    global _INFO
    _INFO = new
    return _INFO


def info() -> DistInfo:
    return _INFO


def is_main() -> bool:
    return _INFO.rank == 0


def all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    """Sum a tensor over ranks in place (no-op alone)."""
    if _INFO.enabled:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


def barrier() -> None:
    if _INFO.enabled:
        dist.barrier()


def cleanup() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
