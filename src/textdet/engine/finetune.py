"""Fine-tuning an imported model: the parts and BatchNorm statistics that stay as they were loaded."""

from __future__ import annotations

from torch import nn

from textdet.errors import ConfigError


def freeze_batchnorm(model: nn.Module) -> None:
    """Every BatchNorm normalises with, and keeps, its running statistics; its scale and shift still learn.

    Fine-tuning an imported detector needs this: its BatchNorms hold the statistics of the data it was
    trained on (or, where the export folded them into convolutions, an identity), and batch statistics
    of a few crops compute another function from the first step on (docs/decisions/fine-tuning-defaults.md).
    """
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.eval()


def frozen_module(model: nn.Module, part: str) -> nn.Module:
    """The module a ``train.freeze`` entry names: a top-level part (``backbone``) or a dotted path inside one
    (``backbone.conv1``), as Detectron2's ``FREEZE_AT`` and MMDetection's ``frozen_stages`` freeze the first
    stages only. An unknown name is an error listing what exists at that level."""
    module = model
    walked = []
    for name in part.split("."):
        children = dict(module.named_children())
        if name not in children:
            where = ".".join(walked) or "the model"
            known = ", ".join(children) or "none"
            raise ConfigError(f"train.freeze: {part!r}: {where} has no part {name!r}; its parts: {known}")
        module = children[name]
        walked.append(name)
    return module


def freeze_parts(model: nn.Module, parts: list[str]) -> None:
    """``train.freeze``: the parameters of these parts (``backbone``, ``neck``, ``head``, or a dotted path
    such as ``backbone.conv1``) do not learn.

    A frozen part runs forward only (no activations kept for a backward pass). On a CPU a frozen backbone
    takes 2.0x to 2.7x more crops a minute; freezing only the first, full-resolution stages of an imported
    backbone saves a smaller share of each step (docs/decisions/fine-tuning-defaults.md).
    """
    for part in parts:
        frozen_module(model, part).requires_grad_(False)


def keep_frozen_in_eval_mode(model: nn.Module, freeze_bn: bool, parts: list[str]) -> None:
    """After ``model.train()``: BatchNorms (``train.freeze_bn``) and frozen parts back in eval mode, so that
    a frozen part keeps its BatchNorm statistics too."""
    if freeze_bn:
        freeze_batchnorm(model)
    for part in parts:
        frozen_module(model, part).eval()
