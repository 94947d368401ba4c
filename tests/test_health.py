"""The blank-map watch (watch/health.py): pixel counts on a hand-made map, when it warns, when it stays quiet
(a map that never worked, a map that comes back), and a tiny run stopped at the right step with its earlier
checkpoint named."""

from __future__ import annotations

import logging
import os

import pytest
import torch

from conftest import RECIPE, tiny_overrides
from textdet.build.training import build_trainer
from textdet.config import load_config
from textdet.errors import TrainingDiverged
from textdet.watch import health as health_module
from textdet.watch.health import BlankMapWatch, text_pixel_hits

WORKING = torch.tensor([90.0, 100.0, 5.0, 1000.0])  # 90% of the text marked, 0.5% of the background
BLANK = torch.tensor([0.0, 100.0, 0.0, 1000.0])
NO_TEXT = torch.tensor([0.0, 0.0, 3.0, 1000.0])
NOISE = torch.tensor([60.0, 100.0, 500.0, 1000.0])  # most text marked, but half the background too


def test_counts_on_a_hand_made_map():
    """2 x 3 map, threshold 0.3. Text (binary 1, mask 1): P 0.9, 0.2 -> 1 of 2 marked. The ignored pixel
    (mask 0, P 0.8) counts nowhere. Background: P 0.3 (>= counts), 0.1, 0.0 -> 1 of 3 marked."""
    prob = torch.tensor([[[[0.9, 0.2, 0.8], [0.3, 0.1, 0.0]]]])
    binary = torch.tensor([[[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]])
    mask = torch.tensor([[[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]])
    counts = text_pixel_hits({"binary": prob}, binary, mask, 0.3)
    assert counts.tolist() == [1.0, 2.0, 1.0, 3.0]
    assert text_pixel_hits(prob, binary.unsqueeze(1), mask, 0.3).tolist() == [1.0, 2.0, 1.0, 3.0]


def _watch(max_steps: int, lr: float, run_dir) -> BlankMapWatch:
    return BlankMapWatch(max_steps, binary_thresh=0.3, lr=lr, run_dir=str(run_dir))


def _feed(watch: BlankMapWatch, counts: torch.Tensor, steps: int) -> None:
    for _ in range(steps):
        watch.add(counts)


def test_warns_then_stops_and_names_the_checkpoints_from_before(tmp_path, caplog):
    for n in (1, 2, 3):
        (tmp_path / f"e{n}.ckpt").write_bytes(b"x")
    watch = _watch(6, 3e-4, tmp_path)
    _feed(watch, WORKING, 2)
    watch.check(epoch=2, step=2)  # epoch 3 (1-based), its map works
    _feed(watch, BLANK, 2)
    with caplog.at_level(logging.WARNING, logger="textdet"):
        watch.check(epoch=2, step=4)
    assert "epoch 3 step 4: the probability map is blank: over the last 2 steps P reached " \
           "postprocess.binary_thresh 0.3 on 0 of 200 text pixels" in caplog.text
    assert "train.max_blank_steps=6" in caplog.text
    _feed(watch, NO_TEXT, 2)
    watch.check(epoch=2, step=6)  # no text: neither blank nor back
    _feed(watch, BLANK, 2)
    watch.check(epoch=2, step=8)  # 4 blank steps
    _feed(watch, BLANK, 2)
    with pytest.raises(TrainingDiverged) as err:
        watch.check(epoch=2, step=10)  # 6
    msg = str(err.value)
    assert msg.startswith("stopped at epoch 3 step 10: the probability map has been blank for 6 steps in a row, "
                          "since epoch 3 step 3 (train.max_blank_steps=6)")
    assert f"kept: e2.ckpt, e1.ckpt in {tmp_path}" in msg  # e3.ckpt was written after the blank began
    assert "this run: 0.0003" in msg


def test_a_map_that_comes_back_resets_the_count(tmp_path, caplog):
    watch = _watch(4, 1e-3, tmp_path)
    _feed(watch, WORKING, 2)
    watch.check(0, 2)
    _feed(watch, BLANK, 3)
    watch.check(0, 5)
    _feed(watch, torch.tensor([1.0, 100.0, 0.0, 1000.0]), 1)  # 1% of the text: back
    with caplog.at_level(logging.INFO, logger="textdet"):
        watch.check(0, 6)
    assert "epoch 1 step 6: the probability map marks text again (1% of the text pixels), after 3 blank steps" \
        in caplog.text
    _feed(watch, BLANK, 3)
    watch.check(0, 9)  # 3 in a row again, not 6
    assert watch.blank_steps == 3 and watch.blank_since == (1, 7)


def test_a_map_that_never_worked_is_not_watched(tmp_path, caplog):
    """From scratch, a map marks nothing (or everything) for a while: that is learning, not a collapse."""
    watch = _watch(2, 1e-3, tmp_path)
    with caplog.at_level(logging.WARNING, logger="textdet"):
        for step in range(1, 6):
            _feed(watch, NOISE if step == 3 else BLANK, 4)
            watch.check(0, 4 * step)
    assert "blank" not in caplog.text and not watch.armed


def test_zero_only_warns(tmp_path, caplog):
    watch = _watch(0, 1e-3, tmp_path)
    _feed(watch, WORKING, 1)
    watch.check(0, 1)
    with caplog.at_level(logging.WARNING, logger="textdet"):
        for step in range(2, 50):
            _feed(watch, BLANK, 1)
            watch.check(0, step)
    assert caplog.text.count("the probability map is blank") == 1
    assert "train.max_blank_steps is 0: training goes on" in caplog.text


@pytest.mark.slow
def test_a_run_whose_map_goes_blank_stops_after_max_blank_steps(synth_root, tmp_path, monkeypatch):
    """The trainer's wiring: counts from every step reach the watch, the stop comes at the step line where the
    blank steps reach the limit, and the epoch checkpoint from before stays. The counts are set by hand (a tiny
    model's map does not work after 6 steps); the sixth step of the tiny set is the last of epoch 1."""
    calls = []

    def counts(preds, binary_map, mask, binary_thresh):
        calls.append(binary_thresh)
        return WORKING.clone() if len(calls) <= 6 else BLANK.clone()

    monkeypatch.setattr(health_module, "text_pixel_hits", counts)
    run = str(tmp_path / "blank")
    cfg = load_config(RECIPE, tiny_overrides(synth_root, run, **{
        "scheduler.num_epochs": 3, "train.max_blank_steps": 4, "system.log_interval": 1,
        "system.val_while_train": False, "postprocess.binary_thresh": 0.25}))
    trainer = build_trainer(cfg, device="cpu", progress=False)
    with pytest.raises(TrainingDiverged) as err:
        trainer.fit()
    assert str(err.value).startswith("stopped at epoch 2 step 4: the probability map has been blank for 4 steps "
                                     "in a row, since epoch 2 step 1 (train.max_blank_steps=4)")
    assert f"kept: e1.ckpt in {run}" in str(err.value)
    assert calls == [0.25] * 10 and os.path.isfile(os.path.join(run, "e1.ckpt"))
    log = open(os.path.join(run, "train.log")).read()
    assert "epoch 2 step 1: the probability map is blank" in log


def test_no_map_to_watch_without_a_binary_threshold(tmp_path):
    watch = BlankMapWatch(max_steps=1, binary_thresh=None, lr=1e-3, run_dir=str(tmp_path))
    watch.add_step(torch.ones(1, 1, 2, 2), {"binary_map": torch.ones(1, 1, 2, 2), "mask": torch.ones(1, 2, 2)})
    watch.check(0, 1)  # nothing counted, nothing raised
    assert watch.window is None and not watch.armed
