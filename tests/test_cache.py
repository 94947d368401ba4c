"""The decoded-image cache: same samples as decoding, shared across forked workers, off when it won't fit."""

from __future__ import annotations

import multiprocessing as mp
import os

import cv2
import numpy as np
import pytest
import torch

from textdet.data import cache as cache_mod
from textdet.data.cache import CachedDecode, ImageCache, image_sizes, plan_cache
from textdet.data.dataset import DetDataset, build_loader
from textdet.data.pipeline import build_transforms


def _write(tmp_path, name: str, h: int, w: int, seed: int) -> str:
    img = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    path = str(tmp_path / name)
    cv2.imwrite(path, img)
    return path


def test_put_get_round_trip_and_slot_checks(tmp_path):
    paths = [_write(tmp_path, "a.png", 10, 20, 0), _write(tmp_path, "b.png", 4, 6, 1)]
    assert image_sizes(paths) == [(10, 20), (4, 6)]
    cache = ImageCache(paths, image_sizes(paths))
    assert cache.nbytes == 10 * 20 * 3 + 4 * 6 * 3
    a = cv2.imread(paths[0])
    assert cache.get(paths[0]) is None  # nothing decoded yet
    cache.put(paths[0], a)
    got = cache.get(paths[0])
    assert np.array_equal(got, a)
    got[:] = 0  # a private copy: the cached pixels stay intact
    assert np.array_equal(cache.get(paths[0]), a)
    cache.put(paths[1], np.zeros((5, 6, 3), np.uint8))  # does not fit its slot: not stored
    assert cache.get(paths[1]) is None
    cache.put(paths[1], np.ones((6, 4, 3), np.uint8))  # EXIF-rotated (transposed) fits
    assert cache.get(paths[1]).shape == (6, 4, 3)
    assert cache.get("/elsewhere.png") is None


def _fill_in_child(cache: ImageCache, path: str) -> None:
    cache.put(path, np.full((10, 20, 3), 7, np.uint8))


def test_a_forked_worker_fills_the_parents_cache(tmp_path):
    path = _write(tmp_path, "a.png", 10, 20, 0)
    cache = ImageCache([path], [(10, 20)])
    child = mp.get_context("fork").Process(target=_fill_in_child, args=(cache, path))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    assert np.array_equal(cache.get(path), np.full((10, 20, 3), 7, np.uint8))


def test_cached_dataset_gives_the_same_samples(synth_root):
    pipeline = [{"DecodeImage": {"img_mode": "RGB"}}, "DetLabelEncode", {"RandomHorizontalFlip": {"p": 0.5}}]
    cols = ["image", "polys", "raw_img_shape"]
    plain = DetDataset(synth_root, "train/images", "train_gt.txt", build_transforms(pipeline), cols, seed=3)
    cached = DetDataset(synth_root, "train/images", "train_gt.txt", build_transforms(pipeline), cols, seed=3,
                        cache_images=True)
    assert plain.cache is None and isinstance(cached.transform.transforms[0], CachedDecode)
    for epoch in (0, 1):  # epoch 0 fills the cache, epoch 1 reads it
        for i in range(len(plain)):
            a, b = plain[(epoch, i)], cached[(epoch, i)]
            assert np.array_equal(a["image"], b["image"]) and a["raw_img_shape"] == b["raw_img_shape"]
            assert all(np.array_equal(p, q) for p, q in zip(a["polys"], b["polys"], strict=True))
    assert (np.asarray(cached.cache.shapes)[:, 0] > 0).all()


def test_loader_workers_share_the_cache(synth_root):
    ds = DetDataset(synth_root, "val/images", "test_gt.txt", build_transforms([{"DecodeImage": {"img_mode": "RGB"}}]),
                    ["image"], seed=0, cache_images=True)
    loader = build_loader(ds, batch_size=2, shuffle=False, drop_remainder=False, num_workers=2, seed=0,
                          persistent_workers=False)
    batches = [b["image"] for b in loader]
    assert (np.asarray(ds.cache.shapes)[:, 0] > 0).all()  # filled by the worker processes
    again = [b["image"] for b in loader]
    assert all(torch.equal(x, y) for x, y in zip(batches, again, strict=True))


def test_auto_mode_skips_when_memory_is_short(tmp_path, monkeypatch):
    paths = [_write(tmp_path, "a.png", 10, 20, 0)]
    monkeypatch.setattr(cache_mod, "available_memory", lambda: 1000)  # 600 bytes needed > 1000 // 4
    assert plan_cache("auto", paths, "train.dataset.cache_images") is None
    assert plan_cache(True, paths, "train.dataset.cache_images") is not None
    assert plan_cache(False, paths, "train.dataset.cache_images") is None
    monkeypatch.setattr(cache_mod, "available_memory", lambda: 10**9)
    assert plan_cache("auto", paths, "k") is not None
    assert not any(f.startswith("textdet_cache") for f in os.listdir("/dev/shm"))  # unlinked at creation


def test_shared_memory_budget_counts_every_local_process(tmp_path, monkeypatch):
    """/dev/shm with room for 3 copies: one process caches there; 4 torchrun processes (each its own copy) go to
    the temp folder instead of all filling /dev/shm."""
    path = _write(tmp_path, "a.png", 10, 20, 0)
    nbytes = 10 * 20 * 3
    monkeypatch.setattr(os.path, "isdir", lambda p: True)
    monkeypatch.setattr(cache_mod, "free_bytes", lambda folder: 3 * nbytes)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    assert ImageCache([path], [(10, 20)]).folder == "/dev/shm"
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert ImageCache([path], [(10, 20)]).folder != "/dev/shm"


def test_a_full_tmpfs_fails_at_start_not_with_sigbus_later(tmp_path, monkeypatch, caplog):
    """The cache's space is reserved when it is made (posix_fallocate): no room is a clear error then; auto mode
    goes without the cache, with a warning."""
    import errno

    from textdet.errors import DataError

    reserved = []
    real = os.posix_fallocate
    monkeypatch.setattr(os, "posix_fallocate", lambda fd, offset, size: reserved.append(size) or real(fd, offset, size))
    path = _write(tmp_path, "a.png", 10, 20, 0)
    ImageCache([path], [(10, 20)])
    assert reserved == [600, 8]  # the pixels and the (1, 2) int32 shapes, allocated up front

    def full(fd, offset, size):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(DataError) as info:
        plan_cache(True, [path], "train.dataset.cache_images")
    for text in ("cannot reserve", "No space left on device", "cache_images=false", "--shm-size"):
        assert text in str(info.value)
    with caplog.at_level("WARNING"):
        assert plan_cache("auto", [path], "train.dataset.cache_images") is None
    assert "not caching decoded images" in caplog.text
