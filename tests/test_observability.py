"""Where the time goes: ETA, the sampled per-phase step breakdown, --profile traces, per-step TensorBoard scalars
(and no duplicate steps after a resume)."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from collections import deque

import pytest
import torch

from conftest import RECIPE, tiny_overrides
from textdet.cli import main
from textdet.errors import TextdetError
from textdet.watch import phases as phases_module
from textdet.watch.eta import Eta, clock
from textdet.watch.phases import StepPhases, phase_advice, phase_text
from textdet.watch.profiling import parse_window

KILL_AT = os.path.join(os.path.dirname(__file__), "kill_at.py")


def train_args(opts: list[str]) -> list[str]:
    return ["-c", RECIPE, *[a for o in opts for a in ("-o", o)], "--no-progress", "--device", "cpu"]


def test_clock_prints_hours_minutes_seconds_and_days():
    assert clock(0) == "0:00:00"
    assert clock(3725) == "1:02:05"  # 1 h 2 min 5 s
    assert clock(2 * 86400 + 61) == "2 days, 0:01:01"


def test_eta_counts_the_steps_left_and_the_evaluations_and_checkpoints_to_come():
    """3 epochs of 10 steps at 1 s a step; evaluation after epochs 2 and 3 (5 s each), checkpoints 0.5 s.
    After step 4 of the first epoch: 6 s left in the epoch; the run adds 20 steps, 2 evaluations and 3
    checkpoints: 6 + 20 + 10 + 1.5 = 37.5 s."""
    eta = Eta(steps_per_epoch=10, num_epochs=3, eval_due=lambda epoch: epoch >= 2)
    eta.ticks = deque([100.0, 101.0, 102.0])  # two steps of 1 s
    eta.last_eval_s, eta.last_ckpt_s = 5.0, 0.5
    assert eta.remaining(0, 4) == (6.0, 37.5)
    assert eta.remaining(2, 10) == (0.0, 5.5)  # the last epoch's evaluation and checkpoint remain


def test_a_sampled_step_charges_each_phase_its_own_time(monkeypatch):
    """Clock readings 0, 1, 3, 4, 7, 8 at arm / forward / loss / backward / optimizer / end: forward 2 s,
    loss 1 s, backward 3 s, optimizer 1 s; the loader's 0.5 s wait and 0.25 s copy come from the prefetcher."""
    readings = iter([0.0, 1.0, 3.0, 4.0, 7.0, 8.0])
    monkeypatch.setattr(phases_module.time, "perf_counter", lambda: next(readings))
    clock_phases = StepPhases(torch.device("cpu"))
    clock_phases.arm()
    for phase in ("forward", "loss", "backward", "optimizer"):
        clock_phases.enter(phase)
    clock_phases.end_step(0.5, lambda: 0.25, window_done=True)
    expected = {"data wait": 0.5, "copy": 0.25, "forward": 2.0, "loss": 1.0, "backward": 3.0, "optimizer": 1.0}
    assert clock_phases.take() == expected
    assert clock_phases.take() is None  # taken once
    assert clock_phases.take_epoch() == expected
    assert phase_text(expected) == ("phases: data wait 500.0, copy 250.0, forward 2000.0, loss 1000.0, "
                                    "backward 3000.0, optimizer 1000.0 ms (one synchronised step)")


def test_unsampled_steps_only_note_their_phase(monkeypatch):
    monkeypatch.setattr(phases_module.time, "perf_counter", lambda: pytest.fail("an unsampled step read the clock"))
    steps = StepPhases(torch.device("cpu"))
    steps.enter("forward")
    assert steps.phase == "forward"
    steps.end_step(0.1, lambda: pytest.fail("copy time read"), window_done=True)
    assert steps.phase == "data wait" and steps.take() is None


def test_the_verdict_names_the_phase_that_dominates():
    """Optimizer 1.5 s of a 4.6 s step = 33%: the advice names it first; backward is 2x forward, as usual."""
    sample = {"data wait": 0.0, "copy": 0.0, "forward": 1.0, "loss": 0.1, "backward": 2.0, "optimizer": 1.5}
    advice = phase_advice(sample)
    assert len(advice) == 1 and advice[0].startswith("the optimizer step is 33% of the step")
    sample.update(loss=2.0, copy=1.0)  # total 7.5: loss 27%, copy 13%, optimizer 20%
    assert [a.split(" is ")[0] for a in phase_advice(sample)] == [
        "the loss (OHEM's top-k sort included)", "the host-to-device copy"]


def test_profile_window_is_checked():
    assert parse_window("5:8") == (5, 8)
    for bad in ("5", "8:5", "0:3", "a:b"):
        with pytest.raises(TextdetError, match="expected START:STOP"):
            parse_window(bad)


def test_truncated_events_keep_every_step_once(tmp_path):
    """Steps 1-5 logged, resume at step 3, steps 4-5 logged again: each step appears once."""
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter

    from textdet.watch.tboard import scalar_steps, truncate_events

    for steps in (range(1, 6), None, range(4, 6)):
        if steps is None:
            assert truncate_events(str(tmp_path), 3) == 2
            continue
        writer = SummaryWriter(str(tmp_path))
        for step in steps:
            writer.add_scalar("step/loss", 1.0 / step, step)
        writer.close()
    assert scalar_steps(str(tmp_path)) == {"step/loss": [1, 2, 3, 4, 5]}
    # files are read in the order they were written, whatever their names sort as (the writers' counters
    # sort as text: ".10" before ".9")
    first, second = sorted(tmp_path.iterdir(), key=lambda path: path.stat().st_mtime_ns)
    first.rename(tmp_path / "events.out.tfevents.z")
    second.rename(tmp_path / "events.out.tfevents.a")
    assert scalar_steps(str(tmp_path)) == {"step/loss": [1, 2, 3, 4, 5]}


@pytest.mark.slow
def test_step_lines_carry_eta_and_phases_and_profile_writes_a_trace(synth_root, tmp_path, capsys):
    """2 epochs x 6 steps, a step line every 2: ETA and phases in each line, phase_ms per epoch in
    metrics.jsonl, --profile 5:8 traces steps 5, 6 and 7, per-step TensorBoard scalars at steps 2..12."""
    run = str(tmp_path / "run")
    assert main(["train", *train_args(tiny_overrides(synth_root, run)), "--profile", "5:8"]) == 0
    lines = [ln for ln in open(os.path.join(run, "train.log")) if "step: [" in ln]
    assert len(lines) == 6
    assert all(", eta: epoch " in ln and ", run " in ln and "phases: data wait " in ln for ln in lines)
    assert "eta: epoch 0:00:00" in lines[2]  # the epoch's last step
    records = [json.loads(ln) for ln in open(os.path.join(run, "metrics.jsonl"))]
    assert all(set(r["phase_ms"]) == {"data_wait", "copy", "forward", "loss", "backward", "optimizer"}
               for r in records)
    (trace,) = glob.glob(os.path.join(run, "profile", "rank0.*.pt.trace.json"))
    names = {e.get("name", "") for e in json.load(open(trace))["traceEvents"]}
    assert sorted(n for n in names if n.startswith("ProfilerStep#")) == ["ProfilerStep#5", "ProfilerStep#6",
                                                                         "ProfilerStep#7"]
    assert "top 15 operators by self time" in capsys.readouterr().out
    if _has_tensorboard():
        from textdet.watch.tboard import scalar_steps

        steps = scalar_steps(os.path.join(run, "tensorboard"))
        for tag in ("step/loss", "step/lr", "step/img_per_s", "step/data_wait_share", "step/loss_scale",
                    "step/skipped_steps", "step/phase_ms/backward"):
            assert steps[tag] == [2, 4, 6, 8, 10, 12], tag


@pytest.mark.slow
def test_resume_leaves_no_duplicate_tensorboard_steps(synth_root, tmp_path):
    """Killed in optimizer step 10 (events up to step 8 written, train_resume.ckpt at step 6), then resumed:
    every per-step tag holds steps 2..12 once."""
    pytest.importorskip("tensorboard")
    from textdet.watch.tboard import scalar_steps

    run = str(tmp_path / "run")
    opts = tiny_overrides(synth_root, run)
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    killed = subprocess.run([sys.executable, KILL_AT, "step", "10", *train_args(opts)], env=env,
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode < 0, killed.stderr[-2000:]
    assert scalar_steps(os.path.join(run, "tensorboard"))["step/loss"] == [2, 4, 6, 8]
    assert main(["train", *train_args(opts + ["model.resume=True"])]) == 0
    steps = scalar_steps(os.path.join(run, "tensorboard"))
    assert steps["step/loss"] == [2, 4, 6, 8, 10, 12]
    assert steps["loss"] == [6, 12]  # the epoch records


def _has_tensorboard() -> bool:
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return False
    return True
