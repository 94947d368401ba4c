"""The compiled training step (``system.mode: 0`` / ``--compile on``): forward and DB loss (OHEM included)
traced as one graph with ``fullgraph=True``, so a graph break is an error at the first step instead of a
silent slowdown; the backward is the graph AOTAutograd derives from it. Shapes are static (``dynamic=False``):
a fixed batch shape compiles once, and a last partial batch costs one recompile, not a dynamic-shape graph for
every step."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from textdet.engine.amp import AmpSettings
from textdet.engine.health import HITS_KEY, text_pixel_hits
from textdet.engine.phases import StepPhases


class ForwardAndLoss(nn.Module):
    """``(images, targets) -> losses``: the model under the autocast of ``amp``, then the loss (fp32 inside).
    A module, so torch.compile sees the model and the loss as attributes it can guard and inline.
    ``watch_thresh``: when set, the result also holds the blank-map watch's counts under ``HITS_KEY``."""

    def __init__(self, model: nn.Module, loss_fn: nn.Module, amp: AmpSettings,
                 watch_thresh: float | None = None) -> None:
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn
        self.amp = amp
        self.watch_thresh = watch_thresh

    def forward(self, images: Tensor, targets: dict[str, Tensor],
                phases: StepPhases | None = None) -> dict[str, Tensor]:
        """``images`` float (N, 3, H, W); ``targets``: the loss columns (binary_map, mask, thresh_map, ...);
        ``phases``: the sampled step breakdown, told where the loss starts (eager only: compiled, it is one
        graph)."""
        with self.amp.context():
            preds = self.model(images)
        if phases is not None:
            phases.enter("loss")
        losses = self.loss_fn(preds, **targets)
        if self.watch_thresh is not None and "binary_map" in targets and "mask" in targets:
            hits = text_pixel_hits(preds, targets["binary_map"], targets["mask"], self.watch_thresh)
            losses = {**losses, HITS_KEY: hits}
        return losses


def compile_step(
    step: ForwardAndLoss, backend: str | Callable = "inductor", fullgraph: bool = True
) -> Callable:
    """``step`` under ``torch.compile(fullgraph=..., dynamic=False)`` (``backend``: a name or a callable such
    as dynamo's CompileCounter). DDP splits its graph at bucket boundaries, so a step around a DDP model is
    compiled with ``fullgraph=False``."""
    return torch.compile(step, backend=backend, fullgraph=fullgraph, dynamic=False)


def compile_report(first_step_s: float, epoch_s: float, steps: int) -> tuple[float, str] | None:
    """Compile time = the first step minus a typical later one (compilation happens inside the first step):
    ``(seconds, log line)``, or None with fewer than 2 steps to compare."""
    if steps < 2:
        return None
    typical = (epoch_s - first_step_s) / (steps - 1)
    compile_s = max(first_step_s - typical, 0.0)
    line = (
        f"torch.compile: about {compile_s:.1f} s "
        f"(first step {first_step_s:.1f} s, later steps {typical:.3f} s each)"
    )
    return compile_s, line
