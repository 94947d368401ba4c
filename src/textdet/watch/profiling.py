"""``--profile START:STOP``: a torch.profiler trace of those training steps, written into the run folder as
``profile/rank<R>.<time>.pt.trace.json`` (Chrome trace JSON: TensorBoard's profiler plugin and ui.perfetto.dev open
it), and the operators that took the most time printed when the window closes."""

from __future__ import annotations

import logging
import os

import torch
from torch.profiler import ProfilerAction, profile, tensorboard_trace_handler

from textdet.device import profiler_activities
from textdet.errors import TextdetError

logger = logging.getLogger("textdet")

TOP_OPERATORS = 15


def parse_window(text: str) -> tuple[int, int]:
    """``"5:8"`` -> (5, 8): steps 5, 6 and 7 (a Python slice of the steps, counted from 1 as in the step line)."""
    start, sep, stop = text.partition(":")
    try:
        window = (int(start), int(stop)) if sep else None
    except ValueError:
        window = None
    if window is None or not 1 <= window[0] < window[1]:
        raise TextdetError(f"--profile {text}: expected START:STOP with 1 <= START < STOP, e.g. --profile 5:8 "
                           "(steps 5, 6 and 7, counted from 1 since training started)")
    return window


class StepProfiler:
    """Records steps ``start`` .. ``stop - 1`` (``step()`` after each training micro-step); steps are labelled
    ``ProfilerStep#N`` in the trace. On the CPU only host operators are recorded; on CUDA/XPU kernels too."""

    def __init__(self, window: tuple[int, int], out_dir: str, rank: int, main: bool, device: torch.device):
        self.start, self.stop = window
        self.out_dir = out_dir
        self.main = main
        activities = profiler_activities(device.type)
        self.sort_key = "self_cpu_time_total" if len(activities) == 1 else f"self_{device.type}_time_total"
        self.trace_handler = tensorboard_trace_handler(out_dir, worker_name=f"rank{rank}")
        self.trace_path: str | None = None
        self.prof = profile(activities=activities, schedule=self.action, on_trace_ready=self.done,
                            record_shapes=True)
        self.prof.start()
        self.prof.step()  # step numbers from 1, as the step line counts

    def action(self, step: int) -> ProfilerAction:
        if step == self.start - 1:
            return ProfilerAction.WARMUP  # the profiler's own start-up stays out of the first recorded step
        if self.start <= step < self.stop - 1:
            return ProfilerAction.RECORD
        if step == self.stop - 1:
            return ProfilerAction.RECORD_AND_SAVE
        return ProfilerAction.NONE

    def step(self) -> None:
        self.prof.step()

    def done(self, prof: profile) -> None:
        """Write the trace, print the top operators (rank 0)."""
        before = set(os.listdir(self.out_dir)) if os.path.isdir(self.out_dir) else set()
        self.trace_handler(prof)
        written = sorted(set(os.listdir(self.out_dir)) - before)
        self.trace_path = os.path.join(self.out_dir, written[-1]) if written else None
        if self.main:
            table = prof.key_averages().table(sort_by=self.sort_key, row_limit=TOP_OPERATORS)
            logger.info("profile of steps %d-%d written to %s (open it in TensorBoard's profiler plugin or "
                        "https://ui.perfetto.dev); top %d operators by self time:\n%s", self.start, self.stop - 1,
                        self.trace_path, TOP_OPERATORS, table)

    def close(self) -> None:
        """Stop the profiler (a run shorter than the window writes what it recorded)."""
        self.prof.stop()
