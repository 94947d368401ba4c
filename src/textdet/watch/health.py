"""What stops a run that will not recover on its own: optimizer steps that stay non-finite
(``check_bad_run``), and a probability map gone blank (``BlankMapWatch``).

The blank-map watch: a fine-tuned detector's probability map can collapse mid-run, P falling under the
binarisation threshold on every text pixel. Dice then sits at 1.0 and its gradient vanishes through the
saturated sigmoid, so the run goes on for its remaining hours and ends with a model that finds nothing
(docs/decisions/blank-map-watch.md). The watch
says so at the next step line and stops the run after ``train.max_blank_steps`` such steps in a row, naming
the checkpoints written before the map went blank. It watches only a map that has worked (most text pixels
marked, little background): a model trained from scratch may mark nothing for its first hundreds of steps,
and that is learning, not a collapse. It reads four numbers a step, which stay on the device until a step
line reads them anyway."""

from __future__ import annotations

import logging
import os

import torch
from torch import Tensor

from textdet.errors import TrainingDiverged
from textdet.runtime import ranks

logger = logging.getLogger("textdet")

BLANK_SHARE = 1e-3  # a window is blank when fewer than this share of its text pixels are over the threshold
WORKING_TEXT_SHARE = 0.5  # a map works when at least this share of the text pixels is over it ...
WORKING_BACKGROUND_SHARE = 0.1  # ... and at most this share of the background


def text_pixel_hits(preds: dict[str, Tensor] | Tensor, binary_map: Tensor, mask: Tensor,
                    binary_thresh: float) -> Tensor:
    """``[text pixels with P >= binary_thresh, text pixels, background pixels with P >= binary_thresh,
    background pixels]`` of a batch, a float tensor of 4 (no gradient). Text pixels are those of
    ``binary_map``, background the rest; pixels that ``mask`` ignores are neither."""
    prob = preds["binary"] if isinstance(preds, dict) else preds
    shape = (prob.shape[0], prob.shape[-2], prob.shape[-1])
    with torch.no_grad():
        counted = mask.reshape(shape) > 0.5
        text = (binary_map.reshape(shape) > 0.5) & counted
        background = counted & ~text
        lit = prob.detach().reshape(shape) >= binary_thresh
        counts = [(text & lit).sum(), text.sum(), (background & lit).sum(), background.sum()]
        return torch.stack(counts).float()


class BlankMapWatch:
    """Counts, between step lines, how many text pixels the map still marks. ``max_steps``
    (``train.max_blank_steps``): the blank steps in a row after which ``check`` stops the run, 0: only warn;
    ``binary_thresh``: the post-processing's, which marks text (None: no map to watch, the watch does
    nothing); ``lr``: the run's ``scheduler.lr``, for the advice."""

    def __init__(self, max_steps: int, binary_thresh: float | None, lr: float, run_dir: str) -> None:
        self.max_steps = max_steps
        self.binary_thresh = binary_thresh
        self.lr = lr
        self.run_dir = run_dir
        # Summed counts since the last check, on the device (the check reduces it in place).
        self.window = None
        self.window_steps = 0
        self.armed = False  # the map has worked in a window: going blank from here is a collapse
        self.blank_steps = 0  # micro-steps in a row whose windows were blank
        self.blank_since: tuple[int, int] | None = None  # (1-based epoch, step) the blank stretch began at

    def add_step(self, prob: Tensor, batch: dict) -> None:
        """Count one micro-step's ``prob`` (N, 1, H, W) against its ``batch``'s binary_map and mask (a batch
        without DB targets, or a watch without a threshold, counts nothing)."""
        if self.binary_thresh is None or "binary_map" not in batch or "mask" not in batch:
            return
        self.add(text_pixel_hits(prob, batch["binary_map"], batch["mask"], self.binary_thresh))

    def add(self, hits: Tensor) -> None:
        """``hits``: ``text_pixel_hits`` of a micro-step."""
        self.window = hits if self.window is None else self.window + hits
        self.window_steps += 1

    def check(self, epoch: int, step: int) -> None:
        """At a step line (``epoch`` 0-based, ``step`` 1-based in the epoch): warn when the map went blank,
        say when it came back, raise ``TrainingDiverged`` once it has been blank for ``max_steps`` steps."""
        if self.window is None:
            return
        hits, text, background_hits, background = ranks.all_reduce_sum(self.window).tolist()
        steps = self.window_steps
        self.window, self.window_steps = None, 0
        if text == 0:  # no text in these windows: nothing to judge by
            return
        if hits >= WORKING_TEXT_SHARE * text and background_hits <= WORKING_BACKGROUND_SHARE * background:
            self.armed = True
        if not self.armed:
            return
        if hits >= BLANK_SHARE * text:
            if self.blank_since is not None:
                logger.info("epoch %d step %d: the probability map marks text again (%.0f%% of the text "
                            "pixels), after %d blank steps", epoch + 1, step, 100 * hits / text,
                            self.blank_steps)
            self.blank_steps, self.blank_since = 0, None
            return
        if self.blank_since is None:
            self.blank_since = (epoch + 1, max(step - steps, 0) + 1)
            logger.warning(self._blank_text(epoch, step, hits, text, steps) + self._what_next())
        self.blank_steps += steps
        if self.max_steps and self.blank_steps >= self.max_steps:
            since_epoch, since_step = self.blank_since
            raise TrainingDiverged(
                f"stopped at epoch {epoch + 1} step {step}: the probability map has been blank for "
                f"{self.blank_steps} steps in a row, since epoch {since_epoch} step {since_step} "
                f"(train.max_blank_steps={self.max_steps}): P stays under postprocess.binary_thresh "
                f"{self.binary_thresh:g} on every text pixel, so this model finds no text and Dice's "
                f"gradient has vanished. {self._kept_before()} Rerun with a lower scheduler.lr (this run: "
                f"{self.lr:g}; half is a start), or set train.max_blank_steps: 0 to train on regardless")

    def _blank_text(self, epoch: int, step: int, hits: float, text: float, steps: int) -> str:
        return (f"epoch {epoch + 1} step {step}: the probability map is blank: over the last {steps} steps "
                f"P reached postprocess.binary_thresh {self.binary_thresh:g} on {hits:.0f} of {text:.0f} "
                "text pixels, so the model would find no text. ")

    def _what_next(self) -> str:
        if not self.max_steps:
            return "train.max_blank_steps is 0: training goes on"
        return (f"The run stops after train.max_blank_steps={self.max_steps} blank steps in a row unless "
                f"the map comes back; a lower scheduler.lr (this run: {self.lr:g}) is the usual cure")

    def _kept_before(self) -> str:
        """The epoch checkpoints in the run folder written before the blank stretch began."""
        first_blank_epoch = self.blank_since[0]
        kept = [f"e{n}.ckpt" for n in range(first_blank_epoch - 1, 0, -1)
                if os.path.isfile(os.path.join(self.run_dir, f"e{n}.ckpt"))]
        if not kept:
            return "No epoch checkpoint was written before the map went blank."
        return (f"Written before it went blank and kept: {', '.join(kept)} in {self.run_dir} "
                "(model.pretrained takes one to start from).")


def check_bad_run(bad_run: int, epoch: int, step: int, max_bad_steps: int, backing_off: bool,
                  run_dir: str) -> None:
    """After a skipped (non-finite) optimizer step, ``bad_run`` in a row: log it, and raise
    ``TrainingDiverged`` after ``max_bad_steps`` (train.max_bad_steps) in a row, unless fp16 loss scaling is
    still ``backing_off``."""
    logger.warning("epoch %d step %d: non-finite loss or gradients, step skipped (%d in a row)", epoch + 1,
                   step, bad_run)
    if bad_run < max_bad_steps or backing_off:
        return
    ckpt = os.path.join(run_dir, "train_resume.ckpt")
    last = f"the last good checkpoint is {ckpt}" if os.path.isfile(ckpt) else "no checkpoint was written yet"
    raise TrainingDiverged(
        f"stopped at epoch {epoch + 1} step {step}: {bad_run} optimizer steps in a row had a non-finite loss "
        f"or gradients (train.max_bad_steps={max_bad_steps}); none changed the weights and {last}. Try a "
        "lower scheduler.lr, train.clip_grad: True, system.amp_level: O0, or `textdet check-data -c CFG` for "
        "bad labels")
