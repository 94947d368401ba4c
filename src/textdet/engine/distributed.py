"""torchrun (DDP) set-up and the few collective helpers the engine needs: one ``is_main()`` instead of scattered
``if rank == 0``; every helper is a no-op when the process runs alone, so the same code runs with and without."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from textdet import device
from textdet.engine import preflight
from textdet.errors import ConfigError


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


_INFO = DistInfo()


def init_distributed(distribute: bool, device_type: str | torch.device) -> DistInfo:
    """Join the torchrun process group when ``system.distribute`` asks for it, after the pre-flight checks; errors
    speak the user's terms (the unexplained 2-card MindOCR failure is what they exist to prevent)."""
    global _INFO
    under_torchrun = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if not distribute:
        if under_torchrun and world > 1:
            raise ConfigError(f"launched by torchrun with WORLD_SIZE={world} but system.distribute is False: every "
                              "process would train the same model alone; set -o system.distribute=true (or run "
                              "without torchrun)")
        _INFO = DistInfo()
        return _INFO
    if not under_torchrun:
        raise ConfigError("system.distribute is True but the process was not started by torchrun (RANK/WORLD_SIZE "
                          "unset); launch with `torchrun --nproc_per_node=N -m textdet train -c CFG` or set -o "
                          "system.distribute=false")
    chosen = torch.device(device_type)
    device_type = chosen.type
    backend = device.dist_backend(device_type)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        preflight.check(chosen, backend)
    if device_type != "cpu":
        device.set_device(device_type, local_rank)
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    _INFO = DistInfo(dist.get_rank(), dist.get_world_size(), local_rank)
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
