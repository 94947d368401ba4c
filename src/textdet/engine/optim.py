"""Optimizers with MindOCR's names and parameters, and its bias/BN weight-decay filter."""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import torch
from torch import nn

from textdet.config.components import lookup
from textdet.errors import ConfigError


def checked_lr_mult(model: nn.Module, lr_mult: dict[str, float] | None) -> dict[str, float]:
    """``optimizer.lr_mult`` as {part: factor}: each key a top-level part of ``model``, each factor >= 0."""
    lr_mult = dict(lr_mult or {})
    parts = dict(model.named_children())
    for part, factor in lr_mult.items():
        if part not in parts:
            known = ", ".join(parts)
            raise ConfigError(f"optimizer.lr_mult: {part!r} is not a part of the model; parts: {known}")
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor < 0:
            raise ConfigError(f"optimizer.lr_mult.{part}: expected a factor >= 0, got {factor!r}")
    return lr_mult


def param_groups(model: nn.Module, weight_decay: float, filter_bias_and_bn: bool,
                 no_weight_decay_params: list[str] = (),
                 lr_mult: dict[str, float] | None = None) -> list[dict]:
    """Decayed and non-decayed groups: 1-D parameters (``filter_bias_and_bn``) and
    ``no_weight_decay_params`` none.

    ``lr_mult`` ({part: factor}, ``optimizer.lr_mult``) splits them again by top-level part (backbone, neck,
    head); each group's ``lr_mult`` scales the scheduler's learning rate for it (the trainer applies it).
    """
    lr_mult = checked_lr_mult(model, lr_mult)
    groups: dict[tuple[bool, float], list] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        skip = (filter_bias_and_bn and p.ndim <= 1) or any(k in name for k in no_weight_decay_params)
        factor = float(lr_mult.get(name.split(".", 1)[0], 1.0))
        groups.setdefault((not skip, factor), []).append(p)
    if not groups:  # torch.optim refuses an empty list; keep the decayed group as before
        groups[(True, 1.0)] = []
    # decayed groups first, and within each the full rate first: without lr_mult, the order groups always had
    order = sorted(groups, key=lambda key: (not key[0], key[1] != 1.0, key[1]))
    return [{"params": groups[(decayed, factor)], "weight_decay": weight_decay if decayed else 0.0,
             "lr_mult": factor} for decayed, factor in order]


def _sgd(groups, lr, momentum, nesterov, **_):
    return torch.optim.SGD(groups, lr=lr, momentum=momentum, nesterov=nesterov and momentum > 0)


def _nesterov(groups, lr, momentum, **_):
    return torch.optim.SGD(groups, lr=lr, momentum=momentum, nesterov=True)


def _adam_like(cls: type[torch.optim.Optimizer]):
    """Adam, AdamW and NAdam take MindOCR's beta1, beta2 and eps alike."""
    return lambda groups, lr, beta1, beta2, eps, **_: cls(groups, lr=lr, betas=(beta1, beta2), eps=eps)


def _rmsprop(groups, lr, momentum, eps, **_):
    return torch.optim.RMSprop(groups, lr=lr, momentum=momentum, eps=eps)


def _adagrad(groups, lr, eps, **_):
    return torch.optim.Adagrad(groups, lr=lr, eps=eps)


OPTIMIZERS = {"sgd": _sgd, "momentum": _sgd, "nesterov": _nesterov, "adam": _adam_like(torch.optim.Adam),
              "adamw": _adam_like(torch.optim.AdamW), "nadam": _adam_like(torch.optim.NAdam), "rmsprop": _rmsprop,
              "adagrad": _adagrad}


def build_optimizer(model: nn.Module, opt: str, lr: float, weight_decay: float = 0.0, momentum: float = 0.9,
                    nesterov: bool = False, filter_bias_and_bn: bool = True, beta1: float = 0.9, beta2: float = 0.999,
                    eps: float = 1e-8, no_weight_decay_params: list[str] = (),
                    lr_mult: dict[str, float] | None = None) -> torch.optim.Optimizer:
    """An optimizer by MindOCR name (case-insensitive: ``SGD`` works as in the user's config)."""
    make = lookup(OPTIMIZERS, opt.lower(), "optimizer.opt", "optimizer")
    groups = param_groups(model, weight_decay, filter_bias_and_bn, list(no_weight_decay_params), lr_mult)
    try:
        return make(groups, lr=lr, momentum=momentum, nesterov=nesterov, beta1=beta1, beta2=beta2, eps=eps)
    except ValueError as err:  # torch's own checks (lr, betas, eps, momentum)
        raise ConfigError(f"optimizer ({opt}): {err}; check the optimizer section and scheduler.lr") from None


def load_optimizer_state(optimizer: torch.optim.Optimizer, state: dict, where: str) -> None:
    """A resumed optimizer's state; its groups must match this config's, and the config's ``lr_mult``
    factors win (torch would otherwise bring back the saved ones silently)."""
    saved = [len(g["params"]) for g in state["param_groups"]]
    made = [len(g["params"]) for g in optimizer.param_groups]
    if saved != made:
        raise ConfigError(f"{where}: its optimizer holds parameter groups of {saved} tensors, this config "
                          f"makes {made}: optimizer.lr_mult, filter_bias_and_bn or no_weight_decay_params, "
                          "or train.freeze changed since it was saved; resume with the settings it was "
                          "saved with")
    factors = [g.get("lr_mult", 1.0) for g in optimizer.param_groups]
    optimizer.load_state_dict(state)
    for group, factor in zip(optimizer.param_groups, factors, strict=True):
        group["lr_mult"] = factor


def build_optimizer_in_background(model: nn.Module, opt: str, *args, **kwargs) -> Future:
    """``build_optimizer`` in a thread, the name checked at once: torch.optim's first use imports torch._dynamo (1.3 s
    on a CPU), which then runs while the first batch is fetched and computed (docs/decisions/start-up.md)."""
    lookup(OPTIMIZERS, opt.lower(), "optimizer.opt", "optimizer")
    pool = ThreadPoolExecutor(1, thread_name_prefix="textdet-optimizer")
    future = pool.submit(build_optimizer, model, opt, *args, **kwargs)
    pool.shutdown(wait=False)
    return future
