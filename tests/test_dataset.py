"""DetDataset and the loader: bad input is skipped with a named reason, runs are reproducible,
and `textdet check-data` reports every problem."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys

import cv2
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from conftest import RECIPE, tiny_overrides
from textdet.cli import main
from textdet.config import load_config
from textdet.data.dataset import DetDataset, build_loader, collate
from textdet.data.pipeline import build_transforms
from textdet.errors import DataError

SQUARE = [[10, 10], [50, 10], [50, 30], [10, 30]]


def make_set(root, lines: list[str], images: dict[str, bytes | None]) -> None:
    img_dir = os.path.join(root, "imgs")
    os.makedirs(img_dir, exist_ok=True)
    for name, data in images.items():
        if data is None:
            cv2.imwrite(os.path.join(img_dir, name), np.full((64, 96, 3), 200, np.uint8))
        else:
            with open(os.path.join(img_dir, name), "wb") as f:
                f.write(data)
    with open(os.path.join(root, "gt.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def label(name: str, points=SQUARE, text="ab") -> str:
    return f"{name}\t" + json.dumps([{"transcription": text, "points": points}])


def eval_pipeline():
    return build_transforms([{"DecodeImage": {"img_mode": "RGB"}}, "DetLabelEncode"])


def test_bad_lines_and_images_are_reported_and_skipped(tmp_path):
    root = str(tmp_path)
    make_set(root, [
        label("good.jpg"),
        "broken.jpg\tnot json",
        label("missing.jpg"),
        label("corrupt.jpg"),
        label("nan.jpg", points=[[0, 0], [float("nan"), 1], [5, 5], [0, 5]]),
    ], {"good.jpg": None, "broken.jpg": None, "corrupt.jpg": b"not a jpeg", "nan.jpg": None})
    ds = DetDataset(root, "imgs", "gt.txt", eval_pipeline(), ["image", "polys"], seed=0)
    problems = {(p.line_no, p.severity) for p in ds.problems}
    assert (2, "error") in problems  # not JSON: line skipped
    assert (3, "error") in problems  # image not found
    assert any(p.line_no == 5 and p.severity == "warning" for p in ds.problems)  # NaN polygon dropped
    assert [r.rel_path for r in ds.records] == ["good.jpg", "corrupt.jpg", "nan.jpg"]
    out = ds[(0, 1)]  # corrupt.jpg: replaced by another sample, counted
    assert out["_skipped"] == 1 and out["image"].shape == (64, 96, 3)
    good = ds[(0, 0)]
    assert good["_skipped"] == 0 and len(good["polys"]) == 1


def test_missing_folder_and_label_file_name_the_config_key(tmp_path):
    with pytest.raises(DataError, match=r"image folder not found.*train.dataset.dataset_root"):
        DetDataset(str(tmp_path), "nope", "gt.txt", eval_pipeline(), ["image"], config_prefix="train.dataset")
    os.makedirs(tmp_path / "imgs")
    with pytest.raises(DataError, match=r"label file not found.*eval.dataset.label_file='gt.txt'"):
        DetDataset(str(tmp_path), "imgs", "gt.txt", eval_pipeline(), ["image"], config_prefix="eval.dataset")


def test_same_batches_with_and_without_workers(synth_root, tmp_path):
    """Randomness comes from (seed, epoch, index): the number of workers does not change a run."""
    cfg = load_config(RECIPE, tiny_overrides(synth_root, str(tmp_path)))
    pipe = build_transforms(cfg.train.dataset.transform_pipeline)
    ds = DetDataset(synth_root, "train/images", "train_gt.txt", pipe, cfg.train.dataset.output_columns, seed=5)
    batches = []
    for workers in (0, 2):
        loader = build_loader(ds, batch_size=4, shuffle=True, drop_remainder=True, num_workers=workers, seed=5,
                              persistent_workers=False)
        loader.sampler.set_epoch(1)
        batches.append(next(iter(loader)))
    for key in ("image", "binary_map", "thresh_map"):
        assert torch.equal(batches[0][key], batches[1][key])
    loader.sampler.set_epoch(2)
    assert not torch.equal(next(iter(loader))["image"], batches[1]["image"])


def _collate_reporting_shared(samples: list[dict]) -> dict:
    batch = collate(samples)
    return {**batch, "stacked_in_shared_memory": batch["image"].is_shared()}


def test_worker_collates_into_shared_memory():
    """In a worker the batch is stacked straight into shared memory (the hand-off copies nothing); in this process
    it is an ordinary tensor. Strided (flipped) arrays stack too."""
    samples = [{"image": np.arange(6, dtype=np.float32).reshape(2, 3)[:, ::-1], "polys": [k]} for k in range(4)]
    batch = next(iter(DataLoader(samples, batch_size=4, num_workers=1, collate_fn=_collate_reporting_shared)))
    assert batch["stacked_in_shared_memory"] is True and batch["polys"] == [[0], [1], [2], [3]]
    assert torch.equal(batch["image"][3], torch.tensor([[2.0, 1, 0], [5, 4, 3]]))
    assert _collate_reporting_shared(samples)["stacked_in_shared_memory"] is False


def test_drop_remainder_with_too_few_samples_is_explained(synth_root, tmp_path):
    cfg = load_config(RECIPE, tiny_overrides(synth_root, str(tmp_path)))
    ds = DetDataset(synth_root, "val/images", "test_gt.txt", eval_pipeline(), ["image"], seed=0)
    with pytest.raises(DataError, match="lower the batch size"):
        build_loader(ds, batch_size=8, shuffle=False, drop_remainder=True, num_workers=0, seed=cfg.system.seed)


def test_check_data_reports_and_dumps(synth_root, tmp_path, capsys):
    root = str(tmp_path / "data")
    shutil.copytree(synth_root, root)
    with open(os.path.join(root, "train_gt.txt"), "a") as f:
        f.write("img_missing.jpg\t[]\n")
        f.write("img_0.jpg\t{oops\n")
    opts = tiny_overrides(root, str(tmp_path / "run"))
    args = ["check-data", "-c", RECIPE, "--dump", str(tmp_path / "dump"), "--n", "2"]
    for o in opts:
        args += ["-o", o]
    assert main(args) == 1  # errors found
    out = capsys.readouterr().out
    assert "train_gt.txt:13: error: image not found: img_missing.jpg" in out
    assert "train_gt.txt:14: error" in out
    assert "train: 12 usable samples" in out and "eval: 4 usable samples" in out
    dumped = sorted(os.listdir(tmp_path / "dump"))
    assert dumped == ["sample_000.npz", "sample_000.png", "sample_001.npz", "sample_001.png"]
    npz = np.load(tmp_path / "dump" / "sample_000.npz")
    assert set(npz.files) == {"image", "binary_map", "mask", "thresh_map", "thresh_mask"}
    assert npz["image"].shape == (3, 64, 64) and npz["binary_map"].shape == (1, 64, 64)
    png = cv2.imread(str(tmp_path / "dump" / "sample_000.png"))
    assert png.shape == (128, 128, 3)  # 2x2 panels of the 64x64 crop


_FAULTS = """
import resource, sys
import numpy as np
from textdet.data.dataset import keep_freed_memory
taken = keep_freed_memory() if sys.argv[1] == "keep" else None
def sample():  # four 4 MiB buffers, touched and freed together, like a sample's arrays
    bufs = [np.ones(1 << 20, dtype=np.float32) for _ in range(4)]
    del bufs
sample()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    sample()
print(taken, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_keep_freed_memory_stops_page_faults_between_samples():
    """glibc's default trims the 16 MiB freed at the heap top back to the kernel (trim threshold: twice the largest
    buffer), so every sample faults thousands of its 4,096 pages in again; kept, the next sample reuses them all."""
    def faults(mode: str) -> tuple[str, float]:
        out = subprocess.run([sys.executable, "-c", _FAULTS, mode], capture_output=True, text=True, check=True)
        taken, per_sample = out.stdout.split()
        return taken, float(per_sample)

    thp = "/sys/kernel/mm/transparent_hugepage/enabled"
    huge = os.path.exists(thp) and "[always]" in open(thp).read()  # then a 2 MiB page is one fault
    assert faults("default")[1] >= (8 if huge else 1000)  # 2,021 here (4 KiB pages)
    taken, kept = faults("keep")
    assert taken == "True" and kept <= 1  # 0 here; a stray fault is not the heap


def test_min_epoch_samples_passes_over_a_small_set_several_times(tmp_path):
    """3 photos and min_samples 7: each photo 3 times an epoch (9 samples); position p reads photo p % 3, the
    first pass is the unrepeated set's sample for sample, and a later pass draws its own augmentation (a
    random brightness of a flat grey photo: another grey level)."""
    root = str(tmp_path)
    make_set(root, [label(f"{name}.jpg") for name in "abc"], dict.fromkeys(["a.jpg", "b.jpg", "c.jpg"]))
    brighten = build_transforms([{"DecodeImage": {"img_mode": "RGB"}}, "DetLabelEncode",
                                 {"RandomColorAdjust": {"brightness": 0.5}}])
    once = DetDataset(root, "imgs", "gt.txt", brighten, ["image", "img_path"], seed=0)
    repeated = DetDataset(root, "imgs", "gt.txt", brighten, ["image", "img_path"], seed=0, min_samples=7)
    assert (len(once), repeated.repeats, len(repeated)) == (3, 3, 9)
    names = [os.path.basename(repeated[(0, position)]["img_path"]) for position in range(9)]
    assert names == ["a.jpg", "b.jpg", "c.jpg"] * 3
    for position in range(3):
        assert np.array_equal(repeated[(0, position)]["image"], once[(0, position)]["image"])
    first_pass, second_pass = repeated[(0, 0)]["image"], repeated[(0, 3)]["image"]
    assert first_pass.std() == 0 and second_pass.std() == 0  # flat grey, at two levels
    assert first_pass[0, 0, 0] != second_pass[0, 0, 0]
    # a set as large as min_samples is passed over once
    assert DetDataset(root, "imgs", "gt.txt", brighten, ["image"], seed=0, min_samples=3).repeats == 1
