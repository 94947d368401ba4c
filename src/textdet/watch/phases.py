"""Where one training step's time goes. Every ``system.log_interval`` steps one step is sampled: the device is
synchronised at each phase boundary (host-to-device copy, forward, loss, backward, optimizer step), so kernels
queued by a phase are charged to it and not to whichever later phase first waits for them. Other steps only note
the phase they are in (the hang watchdog reports it), so sampling costs one synchronised step per interval."""

from __future__ import annotations

import time

import torch

from textdet.device import synchronize

# The order a step runs in; "data wait" is the time blocked on the loader before the step.
PHASES = ("data wait", "copy", "forward", "loss", "backward", "optimizer")
# What each phase is waiting on, for the hang watchdog: a rank stuck in a collective waits for the others.
WAITS_ON = {
    "data wait": "the data loader (a worker process or the next file)",
    "copy": "the host-to-device copy of a batch",
    "forward": "the model's forward pass (under DDP it first syncs BatchNorm buffers with every rank)",
    "loss": "the loss",
    "backward": "backward and the gradient all-reduce (waits for every rank)",
    "optimizer": "the optimizer step",
    "evaluation": "evaluation (its scores are summed over every rank at the end)",
    "checkpoint": "a checkpoint write (rank 0) / the barrier after it",
    "start": "start-up before the first step",
}


class StepPhases:
    """Per-phase seconds of sampled steps. ``arm()`` before a sampled micro-step, ``enter(phase)`` at each phase
    start, ``end_step(...)`` after each micro-step; a sample ends with the optimizer step of its accumulation
    window and is averaged per micro-step."""

    def __init__(self, device: torch.device):
        self.device = device
        self.phase = "start"
        self.phase_since = time.time()  # wall clock: the watchdog compares it across processes
        self.sampling = False
        self.current: dict[str, float] = {}
        self.micro_steps = 0
        self.samples: list[dict[str, float]] = []  # finished samples not yet taken by the step line
        self.epoch_samples: list[dict[str, float]] = []  # finished samples of this epoch (metrics.jsonl)
        self.last_mark = 0.0
        self.charge_to: str | None = None  # the sampled phase running now (None: between steps)

    def arm(self) -> None:
        """Sample the next micro-step (and the rest of its accumulation window)."""
        if self.sampling:
            return
        synchronize(self.device)  # earlier queued work is not this step's
        self.sampling = True
        self.current = dict.fromkeys(PHASES, 0.0)
        self.micro_steps = 0
        self.charge_to = None
        self.last_mark = time.perf_counter()

    def enter(self, phase: str) -> None:
        """The step moves to ``phase``; when sampling, the previous phase's time is closed after a sync."""
        if self.sampling:
            synchronize(self.device)
            now = time.perf_counter()
            if self.charge_to is not None:
                self.current[self.charge_to] += now - self.last_mark
            self.last_mark = now
            self.charge_to = phase if phase in self.current else None
        self.phase = phase
        self.phase_since = time.time()

    def end_step(self, data_wait: float, copy_seconds, window_done: bool) -> None:
        """Close a micro-step; ``copy_seconds()`` is read only when sampling (it may wait for a copy event)."""
        if self.sampling:
            self.enter("between steps")  # closes the last phase; the gap to the next step is the loader's
            self.current["data wait"] += data_wait
            self.current["copy"] += copy_seconds()
            self.micro_steps += 1
            if window_done:
                sample = {k: v / self.micro_steps for k, v in self.current.items()}
                self.samples.append(sample)
                self.epoch_samples.append(sample)
                self.sampling = False
        self.phase = "data wait"
        self.phase_since = time.time()

    def take(self) -> dict[str, float] | None:
        """The latest sample since the last call (for the step line), or None."""
        latest = self.samples[-1] if self.samples else None
        self.samples.clear()
        return latest

    def take_epoch(self) -> dict[str, float] | None:
        """Mean per-phase seconds of this epoch's samples (for metrics.jsonl and the verdict), or None."""
        if not self.epoch_samples:
            return None
        mean = {k: sum(s[k] for s in self.epoch_samples) / len(self.epoch_samples) for k in PHASES}
        self.epoch_samples.clear()
        return mean


def phase_ms(sample: dict[str, float]) -> dict[str, float]:
    """Seconds -> milliseconds rounded to 0.01, keys with underscores (``data_wait``) for JSON and TensorBoard."""
    return {k.replace(" ", "_"): round(1000 * v, 2) for k, v in sample.items()}


def phase_text(sample: dict[str, float]) -> str:
    """``data wait 1.2, copy 0.3, forward 20.1, ... ms (sampled)`` for the step line."""
    parts = ", ".join(f"{name} {1000 * sample[name]:.1f}" for name in PHASES)
    return f"phases: {parts} ms (one synchronised step)"


def phase_advice(sample: dict[str, float]) -> list[str]:
    """What a sampled breakdown suggests, largest share first; empty when no phase stands out."""
    total = sum(sample.values())
    if total <= 0:
        return []
    share = {k: v / total for k, v in sample.items()}
    advice = []
    if share["optimizer"] > 0.25:
        advice.append((share["optimizer"], (
            f"the optimizer step is {100 * share['optimizer']:.0f}% of the step: it runs one kernel per parameter "
            "tensor unless torch's foreach/fused implementation is used (the default on CUDA); on the CPU a larger "
            "batch or fewer, larger steps (train.gradient_accumulation_steps) amortise it; train.ema and "
            "train.clip_grad add to it")))
    if share["loss"] > 0.20:
        advice.append((share["loss"], (
            f"the loss (OHEM's top-k sort included) is {100 * share['loss']:.0f}% of the step: lower "
            "loss.negative_ratio or use a smaller crop; the loss runs in fp32 whatever amp_level says")))
    if share["copy"] > 0.10:
        advice.append((share["copy"], (
            f"the host-to-device copy is {100 * share['copy']:.0f}% of the step: keep NormalizeImage out of the "
            "workers (uint8 batches are 4x smaller) and train.targets_on_device on")))
    if share["backward"] > 3 * max(share["forward"], 1e-9):
        advice.append((share["backward"], (
            f"backward is {sample['backward'] / max(sample['forward'], 1e-9):.1f}x the forward (about 2x is "
            "usual): under torchrun this includes waiting for the gradient all-reduce of the slowest rank")))
    advice.sort(key=lambda item: -item[0])
    return [text for _, text in advice]
