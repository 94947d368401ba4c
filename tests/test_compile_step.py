"""The compiled training step (system.mode 0): forward + DB loss with OHEM as one graph (fullgraph=True), counted
with torch's own counters. Dynamo's "eager" backend runs the traced graph with the eager kernels: graph breaks
and recompilations are decided while tracing, before any backend, so it counts them in seconds where inductor
would take minutes on 2 cores (benchmarks/speed/bench_compile.py times inductor itself)."""

from __future__ import annotations

import torch
from torch._dynamo.testing import CompileCounterWithBackend
from torch._dynamo.utils import counters

from conftest import RECIPE, tiny_overrides
from textdet.build import training as training_module
from textdet.build.training import build_trainer
from textdet.config import load_config
from textdet.engine import step as step_module
from textdet.engine.step import ForwardAndLoss
from textdet.runtime.amp import amp_settings
from textdet.watch.startup_report import compile_report


def _train(synth_root: str, run_dir: str, compile_mode: str, monkeypatch, counter=None) -> dict:
    """One epoch (6 steps of batch 2) of the tiny recipe in bf16 autocast (O2, the recipe's level)."""
    if counter is not None:
        def eager_backend(step, backend="inductor", fullgraph=True):
            return step_module.compile_step(step, backend=counter, fullgraph=fullgraph)

        monkeypatch.setattr(training_module, "compile_step", eager_backend)
    opts = tiny_overrides(synth_root, run_dir, **{"scheduler.num_epochs": 1, "system.amp_level": "O2",
                                                  "system.val_while_train": False})
    trainer = build_trainer(load_config(RECIPE, opts), device="cpu", compile=compile_mode, progress=False)
    return trainer.fit()


def test_the_training_step_compiles_as_one_graph_without_recompiling(synth_root, tmp_path, monkeypatch):
    """The Trainer's own step on real batches (targets from the loader, Adam stepping, bf16 autocast): 6 steps at
    a fixed batch shape (2, 3, 64, 64) compile one frame, with no graph break and no recompilation."""
    torch._dynamo.reset()
    counters.clear()
    counter = CompileCounterWithBackend("eager")
    compiled = _train(synth_root, str(tmp_path / "compiled"), "on", monkeypatch, counter)
    # CompileCounter counts every graph dynamo compiles, recompilations included: 1 = the first step compiled
    # and the next 5 reused it; a graph break would split the step and count in counters["graph_break"]
    assert counter.frame_count == 1
    assert sum(counters["graph_break"].values()) == 0
    assert counters["stats"]["unique_graphs"] == 1
    assert compiled["epoch"] == 1


def test_a_new_batch_shape_costs_one_recompile_and_mode_switches_none():
    """A last partial batch (2 -> 1 image) is one more graph (dynamic=False: no dynamic-shape graph); the same two
    shapes again compile nothing. fullgraph=True: any break would raise here instead of being counted. The
    compiled losses equal the eager module's (the eager backend runs the same kernels)."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    cfg = load_config(RECIPE, ["model.backbone.width=8", "model.neck.out_channels=32"])
    from textdet.build import parts, training

    model = parts.build_model_from_config(cfg, pretrained_backbone=False).train()
    step = ForwardAndLoss(model, training.build_loss_from_config(cfg), amp_settings("O0", "cpu"))
    counter = CompileCounterWithBackend("eager")
    compiled = step_module.compile_step(step, backend=counter)

    def batch(n: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        maps = {k: torch.rand(n, 64, 64) for k in ("thresh_map", "thresh_mask")}
        maps["binary_map"] = (torch.rand(n, 64, 64) > 0.7).float()
        maps["mask"] = torch.ones(n, 64, 64)
        return torch.randn(n, 3, 64, 64), maps

    for n in (2, 1, 2, 1):
        images, targets = batch(n)
        losses, prob = compiled(images, targets)
        losses["loss"].backward()
        eager_losses, eager_prob = step(images, targets)
        assert torch.equal(losses["loss"], eager_losses["loss"]) and torch.equal(prob, eager_prob)
        assert not prob.requires_grad  # the map leaves the step detached: the blank-map watch only reads it
    assert counter.frame_count == 2


def test_compile_time_is_the_first_step_less_a_typical_one():
    """First step 30 s, 4 steps in 33 s: later steps 1 s each, so compiling took 29 s."""
    seconds, line = compile_report(30.0, 33.0, 4)
    assert seconds == 29.0
    assert "about 29.0 s" in line
    assert compile_report(30.0, 30.0, 1) is None
