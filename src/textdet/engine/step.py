"""The compiled training step (``system.mode: 0`` / ``--compile on``): forward and DB loss (OHEM included)
traced as one graph with ``fullgraph=True``, so a graph break is an error at the first step instead of a
silent slowdown; the backward is the graph AOTAutograd derives from it. Shapes are static (``dynamic=False``):
a fixed batch shape compiles once, and a last partial batch costs one recompile, not a dynamic-shape graph for
every step. Also when a run compiles (``want_compile``) and where compiled graphs are cached."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

import torch
from torch import Tensor, nn

from textdet import textdet_home
from textdet.runtime.amp import AmpSettings

logger = logging.getLogger("textdet")


class ForwardAndLoss(nn.Module):
    """``(images, targets) -> (losses, probability map)``: the model under the autocast of ``amp``, then the
    loss (fp32 inside); the map is detached (the blank-map watch counts its text pixels outside the step). A
    module, so torch.compile sees the model and the loss as attributes it can guard and inline. ``predict``
    and ``loss`` are its two halves: the eager loop calls them apart, so that the sampled step breakdown can
    time the loss on its own."""

    def __init__(self, model: nn.Module, loss_fn: nn.Module, amp: AmpSettings) -> None:
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn
        self.amp = amp

    def predict(self, images: Tensor) -> dict[str, Tensor]:
        """``images`` float (N, 3, H, W) -> the model's maps (``binary``, ``thresh``, ``thresh_binary``)."""
        with self.amp.context():
            return self.model(images)

    def loss(self, preds: dict[str, Tensor], targets: dict[str, Tensor]) -> dict[str, Tensor]:
        """``targets``: the loss columns (binary_map, mask, thresh_map, thresh_mask) -> the named loss
        terms."""
        return self.loss_fn(preds, **targets)

    def forward(self, images: Tensor, targets: dict[str, Tensor]) -> tuple[dict[str, Tensor], Tensor]:
        preds = self.predict(images)
        return self.loss(preds, targets), preds["binary"].detach()


def compile_step(
    step: ForwardAndLoss, backend: str | Callable = "inductor", fullgraph: bool = True
) -> Callable:
    """``step`` under ``torch.compile(fullgraph=..., dynamic=False)`` (``backend``: a name or a callable such
    as dynamo's CompileCounter). DDP splits its graph at bucket boundaries, so a step around a DDP model is
    compiled with ``fullgraph=False``."""
    return torch.compile(step, backend=backend, fullgraph=fullgraph, dynamic=False)


def enable_compile_cache() -> str:
    """Persist torch.compile's artefacts under ``$TEXTDET_HOME/compile_cache`` so only the first run compiles
    cold. A ``TORCHINDUCTOR_CACHE_DIR`` the user set wins; torch's /tmp default does not. Returns the folder
    used."""
    import getpass
    import tempfile

    current = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    torch_default = os.path.join(tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}")
    if not current or current == torch_default:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(textdet_home(), "compile_cache")
    folder = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    os.makedirs(folder, exist_ok=True)
    try:
        import torch._inductor.config as inductor_config

        inductor_config.fx_graph_cache = True
        inductor_config.autotune_local_cache = True
    except (ImportError, AttributeError):  # older torch: the directory alone still helps
        pass
    logger.info("torch.compile cache: %s (the first run compiles; later runs reuse it)", folder)
    return folder


def want_compile(mode: str, system_mode: int, device_type: str, auto_on: bool) -> bool:
    """``--compile on/off/auto``: auto compiles when ``system.mode`` is 0 and ``auto_on``
    (``device.compiles_by_default``: CUDA only; minutes on the CPU, untested on the other accelerators: eager
    there unless ``--compile on``)."""
    if mode != "auto" or system_mode == 1:
        return mode == "on"
    if device_type == "cpu":
        logger.info("system.mode 0 (compiled): on CPU torch.compile costs minutes for ~10% speed; running "
                    "eager (force it with --compile on)")
    elif not auto_on:
        logger.info("system.mode 0 (compiled): --compile auto compiles on CUDA only; running eager on %s "
                    "(force it with --compile on, untested there)", device_type)
    return auto_on
