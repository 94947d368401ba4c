"""Fine-tuning an imported model: the parts and BatchNorm statistics that stay as they were loaded."""

from __future__ import annotations

from torch import nn

from textdet.errors import ConfigError


def freeze_batchnorm(model: nn.Module) -> None:
    """Every BatchNorm normalises with, and keeps, its running statistics; its scale and shift still learn.

    Fine-tuning an imported detector needs this: its BatchNorms hold the statistics of the data it was
    trained on (or, where the export folded them into convolutions, an identity), and batch statistics
    of a few crops compute another function from the first step on (docs/DESIGN_NOTES.md, "Fine-tuning
    an imported detector").
    """
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.eval()


def freeze_parts(model: nn.Module, parts: list[str]) -> None:
    """``train.freeze``: the parameters of these top-level parts (backbone, neck, head) do not learn.

    A frozen backbone runs forward only (no activations kept for a backward pass): on a CPU, fine-tuning
    takes 2.0x to 2.7x more crops a minute (docs/DESIGN_NOTES.md, "Fine-tuning an imported detector").
    """
    children = dict(model.named_children())
    for part in parts:
        if part not in children:
            known = ", ".join(children)
            raise ConfigError(f"train.freeze: {part!r} is not a part of the model; parts: {known}")
        children[part].requires_grad_(False)


def keep_frozen_in_eval_mode(model: nn.Module, freeze_bn: bool, parts: list[str]) -> None:
    """After ``model.train()``: BatchNorms (``train.freeze_bn``) and frozen parts back in eval mode, so that
    a frozen part keeps its BatchNorm statistics too."""
    if freeze_bn:
        freeze_batchnorm(model)
    for part in parts:
        getattr(model, part).eval()
