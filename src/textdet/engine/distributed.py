"""torchrun (DDP) set-up: join the process group when ``system.distribute`` asks for it. Errors speak the
user's terms (the unexplained 2-card MindOCR failure is what they exist to prevent); ``runtime.ranks`` holds
the rank and the collectives everything else uses."""

from __future__ import annotations

import os
from collections.abc import Callable

import torch
import torch.distributed as dist

from textdet import device
from textdet.errors import ConfigError
from textdet.runtime.ranks import DistInfo, set_info


def init_distributed(distribute: bool, device_type: str | torch.device,
                     preflight: Callable[[torch.device, str], None] | None = None) -> DistInfo:
    """Join the torchrun process group when ``distribute`` (``system.distribute``) asks for it;
    ``preflight(device, backend)`` runs first, before any collective can hang (the distributed pre-flight)."""
    under_torchrun = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if not distribute:
        if under_torchrun and world > 1:
            raise ConfigError(f"launched by torchrun with WORLD_SIZE={world} but system.distribute is False: every "
                              "process would train the same model alone; set -o system.distribute=true (or run "
                              "without torchrun)")
        return set_info(DistInfo())
    if not under_torchrun:
        raise ConfigError("system.distribute is True but the process was not started by torchrun (RANK/WORLD_SIZE "
                          "unset); launch with `torchrun --nproc_per_node=N -m textdet train -c CFG` or set -o "
                          "system.distribute=false")
    chosen = torch.device(device_type)
    backend = device.dist_backend(chosen.type)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized() and preflight is not None:
        preflight(chosen, backend)
    if chosen.type != "cpu":
        device.set_device(chosen.type, local_rank)
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    return set_info(DistInfo(dist.get_rank(), dist.get_world_size(), local_rank))
