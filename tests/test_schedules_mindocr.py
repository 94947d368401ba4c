"""LR schedules pinned to MindOCR 0.5's own lists (tests/fixtures/mindocr_schedules.json, written by
benchmarks/parity/mindocr/make_mindocr_schedules.py from ``mindocr.scheduler.create_scheduler``): every
scheduler name, and the scheduler section of every MindOCR det config over its whole run."""

from __future__ import annotations

import json
import os

import pytest

from textdet.engine.schedule import LRSchedule
from textdet.errors import ConfigError

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "mindocr_schedules.json")
CASES = json.load(open(FIXTURE))["cases"]
# create_scheduler's defaults, for the keys a config leaves out
DEFAULTS = dict(min_lr=1e-6, warmup_epochs=3, warmup_factor=0.0, decay_epochs=10, decay_rate=0.9, milestones=(),
                num_epochs=200, num_cycles=1, cycle_decay=1.0, lr_epoch_stair=False)


def schedule_of(case: dict) -> LRSchedule:
    args = {**DEFAULTS, **case["scheduler"]}
    name = args.pop("scheduler")
    return LRSchedule(name, args.pop("lr"), case["steps_per_epoch"], args.pop("num_epochs"), **args)


def test_fixture_covers_every_scheduler_name():
    names = {case["scheduler"]["scheduler"] for case in CASES}
    assert names == {"constant", "polynomial_decay", "cosine_decay", "warmup_cosine_decay", "exponential_decay",
                     "step_decay", "multi_step_decay"}


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_schedule_equals_mindocr(case):
    schedule = schedule_of(case)
    ours = [schedule.at_micro_step(step) for step in case["steps"]]
    worst = max(abs(a - b) for a, b in zip(ours, case["lrs"], strict=True))
    assert worst < 1e-12, f"{case['name']}: max |textdet - MindOCR| {worst:.2e}"


def test_accumulation_takes_the_last_micro_batch_lr():
    # 4 micro-batches an epoch, accumulation 2: update k takes micro-batch 2k + 1's LR, as MindOCR's
    # TrainOneStepWrapper intends (it calls get_lr() on the window's first micro-batch to advance global_step)
    schedule = LRSchedule("polynomial_decay", 0.01, 4, 3, warmup_epochs=1, accumulation=2)
    assert [schedule.micro_step(update) for update in range(5)] == [1, 3, 5, 7, 9]
    assert schedule(0) == pytest.approx(0.01 * 1 / 4)
    assert schedule(1) == pytest.approx(0.01 * 3 / 4)
    # 5 micro-batches an epoch: the odd one is dropped, the next epoch's updates start at micro-batch 5
    odd = LRSchedule("constant", 0.01, 5, 3, accumulation=2)
    assert [odd.micro_step(update) for update in range(4)] == [1, 3, 6, 8]


def test_accumulation_lr_mindocr_takes_entry_k():
    # MindOCR 0.5 on MindSpore 2.x: update k takes entry k of the micro-batch list (measured by
    # benchmarks/parity/mindocr/parity_mindocr.py --train, case accum2). 4 micro-batches an epoch, warm-up 1
    # epoch, then polynomial decay to 0 over 2 epochs, power 0.9: entry 1 = 0.01 * 1/4;
    # entry 5 = 0.01 * (1 - 0.25/2)^0.9
    schedule = LRSchedule("polynomial_decay", 0.01, 4, 3, warmup_epochs=1, accumulation=2,
                          accumulation_lr="mindocr")
    assert [schedule.micro_step(update) for update in range(5)] == [0, 1, 2, 3, 4]
    assert schedule(1) == pytest.approx(0.0025, abs=1e-15)
    assert schedule(4) == pytest.approx(0.01, abs=1e-15)
    assert schedule(5) == pytest.approx(0.0088676235, abs=1e-10)
    # the default (window_end) takes entry 2k + 1 for the same update: 5 -> entry 11, 0.01 * (1 - 1.75/2)^0.9
    assert LRSchedule("polynomial_decay", 0.01, 4, 3, warmup_epochs=1, accumulation=2)(5) == pytest.approx(
        0.01 * 0.125**0.9, abs=1e-15)


def test_accumulation_lr_unknown_is_a_config_error():
    with pytest.raises(ConfigError, match="train.accumulation_lr must be one of window_end, mindocr"):
        LRSchedule("constant", 0.01, 4, 3, accumulation=2, accumulation_lr="mindspore")


def test_step_decay_needs_positive_decay_epochs():
    with pytest.raises(ConfigError, match="scheduler.decay_epochs must be > 0 for step_decay"):
        LRSchedule("step_decay", 0.01, 4, 3, decay_epochs=0)


def test_accumulation_lr_config_key_is_checked():
    from textdet.config import load_config

    assert load_config(None, ["train.accumulation_lr=mindocr"]).train.accumulation_lr == "mindocr"
    choices = r"\['window_end', 'mindocr'\]"
    with pytest.raises(ConfigError, match=rf"'train.accumulation_lr' must be one of {choices}"):
        load_config(None, ["train.accumulation_lr=update"])
