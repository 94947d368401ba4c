"""What training and inference both build from a config: the model and its weights, the post-processing and
the metric, the datasets and loaders, the evaluation, the ``Detector``. One ``build_*`` per part, errors
prefixed with the key's YAML line; the objects it returns take plain arguments and know no config."""

from __future__ import annotations

import logging
import os
from typing import Any

import torch
from torch import nn

from textdet.build.sections import build_pipeline as build_pipeline  # parts.* for the commands
from textdet.build.sections import build_section, eval_tile, model_specs, preset_of, tile_advice, validate
from textdet.build.sections import train_shrink as train_shrink  # parts.* for the commands
from textdet.config import Config
from textdet.config.components import check_kwargs, lookup
from textdet.config.loader import get_key, located, parse_buckets
from textdet.data.dataset import DetDataset, build_loader, collate
from textdet.data.decode import DecodeImage
from textdet.data.device_targets import device_columns
from textdet.data.labels import read_label_files
from textdet.data.pipeline import Compose, build_transforms
from textdet.data.resize import DetResize, NormalizeImage
from textdet.data.tiling import TileSpec
from textdet.device import is_accelerator, pick_device
from textdet.errors import ConfigError, TextdetError
from textdet.hub import download, is_url
from textdet.metrics import METRICS
from textdet.models import BACKBONES, HEADS, NECKS, build_model
from textdet.models.weights import MINDOCR_ZOO
from textdet.postprocess import POSTPROCESSES
from textdet.predict import INFER_RESIZE, Detector, Preprocess, TorchRunner, find_images, hwc_normalize
from textdet.runtime.amp import AmpSettings, amp_settings
from textdet.runtime.buckets import EvalBatching, eval_batching
from textdet.runtime.checkpoint import chosen_thresholds, load_weights, thresholds_note
from textdet.runtime.evaluator import Evaluator, ThresholdSweep, evaluate_onnx, timed_run
from textdet.runtime.feed import DeviceInput, split_device_normalize
from textdet.runtime.onnx_model import OnnxModel, onnxruntime_installed

logger = logging.getLogger("textdet")

EVAL_CKPT_KEYS = ("eval.ckpt_load_path",)  # where eval looks when --ckpt is not given
# where predict and export look, in order
PREDICT_CKPT_KEYS = ("predict.ckpt_load_path", "eval.ckpt_load_path")


# ------------------------------------------------------------------------------------------------ the model
def check_model_specs(cfg: Config) -> dict[str, dict]:
    """Names and keyword arguments of backbone/neck/head, checked without building anything."""
    specs = model_specs(cfg)
    for part, table in (("backbone", BACKBONES), ("neck", NECKS), ("head", HEADS)):
        with located(cfg, f"model.{part}"):
            name = specs[part].get("name")
            kwargs = {k: v for k, v in specs[part].items() if k != "name"}
            check_kwargs(lookup(table, name, f"model.{part}.name", part), kwargs, f"model.{part} ({name})",
                         injected=("in_channels",) if part != "backbone" else ())
    return specs


def build_model_from_config(cfg: Config, pretrained_backbone: bool | None = None) -> nn.Module:
    """The DBNet of ``cfg.model``. ``pretrained_backbone=False`` skips the ImageNet weights and
    ``model.pretrained`` (nothing downloaded or read): eval and resume load a checkpoint that replaces
    them."""
    specs = check_model_specs(cfg)
    pretrained = None
    if pretrained_backbone is False:
        specs["backbone"]["pretrained"] = False
    elif cfg.model.pretrained is True:
        pretrained = zoo_checkpoint(cfg, specs)
    elif cfg.model.pretrained:
        pretrained = cfg.model.pretrained
    with located(cfg, "model"):
        return build_model(specs["backbone"], specs["neck"], specs["head"], pretrained=pretrained)


def zoo_checkpoint(cfg: Config, specs: dict[str, dict]) -> str:
    """``model.pretrained: true``: the MindOCR model-zoo URL of the preset whose network ``specs`` is (the
    backbone's own ``pretrained`` aside), so a YAML spelling out ``dbnet_resnet50`` gets that file as
    ``model.name`` would."""
    name = preset_of(specs)
    if name not in MINDOCR_ZOO:
        with located(cfg, "model.pretrained"):
            raise ConfigError(f"model.pretrained: true, but this network is none of MindOCR's model-zoo "
                              f"models ({', '.join(MINDOCR_ZOO)}); give a checkpoint path or URL, or false")
    return MINDOCR_ZOO[name]


def load_model(cfg: Config, ckpt: str | None, keys: tuple[str, ...] = EVAL_CKPT_KEYS
               ) -> tuple[nn.Module, str | None, dict[str, float]]:
    """The DBNet of ``cfg`` with ``resolve_ckpt``'s weights (random for ``keys=()`` and no ``ckpt``), the
    path, and the thresholds taken from the checkpoint into ``cfg.postprocess`` (``adopt_thresholds``)."""
    path = None
    if ckpt or keys:
        path, what = resolve_ckpt(cfg, ckpt, keys)  # before building: a missing file fails first
    model = build_model_from_config(cfg, pretrained_backbone=False)
    adopted: dict[str, float] = {}
    if path is not None:
        held = load_weights(model, path, what)
        adopted = adopt_thresholds(cfg, held, path)
    return model, path, adopted


def resolve_ckpt(cfg: Config, ckpt: str | None, keys: tuple[str, ...] = EVAL_CKPT_KEYS) -> tuple[str, str]:
    """(path, source) of ``ckpt`` (--ckpt), else of the first set config key of ``keys``; a URL is
    downloaded."""
    for what in ("--ckpt", *keys):
        path = ckpt if what == "--ckpt" else get_key(cfg, what)
        if not path:
            continue
        if is_url(path):
            return str(download(path, what, "give a local checkpoint path instead")), what
        if not os.path.isfile(path):
            raise TextdetError(f"checkpoint not found: {path} (from {_source(cfg, what)}); train first or "
                               "point it at a .ckpt file")
        return path, what
    raise ConfigError(f"no checkpoint: pass --ckpt PATH or set {' / '.join(keys)}")


def _source(cfg: Config, what: str) -> str:
    """``what`` (--ckpt or a config key), with the YAML line a config key was set at when known."""
    meta = getattr(cfg, "meta", None)
    if meta is None or what == "--ckpt":
        return what
    return f"{what} at {meta.where(what)}"


def overridden_keys(cfg: Config) -> set[str]:
    """The keys the command line's ``-o`` set."""
    overrides = getattr(getattr(cfg, "meta", None), "overrides", ())
    return {option.split("=", 1)[0].strip() for option in overrides}


def adopt_thresholds(cfg: Config, held: Any, path: str) -> dict[str, float]:
    """The thresholds a training run chose for the checkpoint ``held`` (``checkpoint.chosen_thresholds``) put
    into ``cfg.postprocess``, each unless ``-o postprocess.KEY=...`` sets it. Returns the values adopted."""
    adopted = chosen_thresholds(held, path, overridden_keys(cfg))
    cfg.postprocess.update(adopted)
    return adopted


def build_postprocess_from_config(cfg: Config):
    return build_section(cfg, "postprocess", POSTPROCESSES)


def build_metric_from_config(cfg: Config):
    return build_section(cfg, "metric", METRICS)


def main_indicator(cfg: Config) -> str:
    return str(cfg.metric.get("main_indicator", "f-score"))


def inference_amp(cfg: Config, device_type: str) -> AmpSettings:
    """Evaluation and prediction: ``system.amp_level_infer`` (MindOCR's, default O0)."""
    system = cfg.system
    return amp_settings(system.amp_level_infer, device_type, system.amp_dtype, key="system.amp_level_infer")


def inference_runtime(cfg: Config, device: torch.device, amp: AmpSettings) -> str:
    """``system.infer_runtime`` for ``device`` and the inference precision ``amp``: ``auto`` runs a CPU
    evaluation or prediction in fp32 through ONNX Runtime, the model traced in memory (its fused kernels are
    faster there and give the same maps: docs/decisions/cpu-inference.md), and everything else in PyTorch."""
    choice = cfg.system.infer_runtime
    if choice != "auto":
        return choice
    fp32_on_cpu = device.type == "cpu" and amp.dtype is None
    return "onnxruntime" if fp32_on_cpu and onnxruntime_installed() else "torch"


# ------------------------------------------------------------------------------------------------ data
def build_dataset(cfg: Config, split: str, pipeline: Compose, device_targets: bool = False,
                  aside_every: int = 0) -> DetDataset:
    """``device_targets``: the workers ship polygon arrays instead of the four DB maps (split_device_targets);
    ``aside_every``: the train split less the photos the start guard sets aside (``guard_aside_every``)."""
    dataset = getattr(cfg, split).dataset
    if dataset.type not in ("DetDataset",):
        raise ConfigError(f"{split}.dataset.type: unknown dataset '{dataset.type}' (valid: DetDataset)")
    columns = dataset.output_columns
    min_samples = dataset.min_epoch_samples if split == "train" else 0  # an evaluation scores each photo once
    if device_targets:
        columns = device_columns(columns)
    return DetDataset(dataset.dataset_root, dataset.data_dir, dataset.label_file, pipeline, columns,
                      sample_ratio=dataset.sample_ratio, seed=cfg.system.seed,
                      config_prefix=f"{split}.dataset", cache_images=dataset.cache_images,
                      aside_every=aside_every, min_samples=min_samples)


def worker_count(requested: int, world_size: int, key: str) -> int:
    """``requested`` capped at the cores each process gets, as MindOCR caps it (more only thrash)."""
    cores = max((os.cpu_count() or 1) // max(world_size, 1), 1)
    if requested > cores:
        logger.info("%s=%d but %d CPU core(s) per process are available: using %d worker(s)", key, requested,
                    cores, cores)
        return cores
    return requested


def build_split_loader(cfg: Config, split: str, dataset: DetDataset, rank: int, world_size: int,
                       device: torch.device) -> torch.utils.data.DataLoader:
    """The ``{split}.loader`` DataLoader over ``dataset``: the train split shuffles, drops the remainder as
    set and pads its shards; eval batches by input shape (``eval_batching``)."""
    loader_cfg = getattr(cfg, split).loader
    train = split == "train"
    workers = worker_count(loader_cfg.num_workers, world_size, f"{split}.loader.num_workers")
    if train:
        batching = EvalBatching(collate)  # no shape buckets in training
        drop_remainder = loader_cfg.drop_remainder
    else:
        batching = eval_loader_batching(cfg, dataset, loader_cfg.batch_size)
        drop_remainder = False
    return build_loader(dataset, batch_size=loader_cfg.batch_size, shuffle=loader_cfg.shuffle and train,
                        drop_remainder=drop_remainder, num_workers=workers, seed=cfg.system.seed, rank=rank,
                        world_size=world_size, pin_memory=device.type != "cpu",
                        prefetch_factor=loader_cfg.prefetch_factor,
                        persistent_workers=loader_cfg.persistent_workers, pad_shards=train,
                        collate_fn=batching.collate_fn, batches=batching.batches)


def eval_loader_batching(cfg: Config, dataset: DetDataset, batch_size: int) -> EvalBatching:
    """``eval.shape_buckets`` and the eval batch size as the loader's collate and batch sampler."""
    return eval_batching(parse_buckets(cfg.eval.shape_buckets), dataset, batch_size)


# ------------------------------------------------------------------------------------------------ evaluation
def build_evaluator(cfg: Config, pipeline: Compose, dev: torch.device, normalize_on_device: bool,
                    amp: AmpSettings, progress: bool = False, sweep: bool = False,
                    per_image: bool = False) -> Evaluator:
    """The config's eval set, post-processing, metric and runtime (``inference_runtime``) for a model on
    ``dev``: every eval path's wiring."""
    pipe, normalize = split_device_normalize(pipeline, normalize_on_device)
    loader = build_split_loader(cfg, "eval", build_dataset(cfg, "eval", pipe), 0, 1, dev)
    post, metric = build_postprocess_from_config(cfg), build_metric_from_config(cfg)
    threshold_sweep = ThresholdSweep(post, metric) if sweep else None
    return Evaluator(loader, post, metric, DeviceInput(dev, normalize), amp, progress, threshold_sweep,
                     per_image, scaled_tile(cfg, pipeline), inference_runtime(cfg, dev, amp))


def scaled_tile(cfg: Config, pipeline: Compose) -> TileSpec | None:
    """``eval.tile`` at the scale the eval pipeline's DetResize reads an image of one tile's size."""
    spec = eval_tile(cfg)
    resize = next((step for step in pipeline.transforms if isinstance(step, DetResize)), None)
    if spec is None or resize is None:
        return spec
    return spec.at_scale(resize.tile_scale())


def evaluate_checkpoint(cfg: Config, ckpt: str | None = None, device: str | None = None,
                        progress: bool = False, sweep: bool = False, per_image: bool = False) -> dict:
    """``textdet eval``: recall, precision, f-score, images, seconds and images/s of a checkpoint (+ a sweep;
    + the thresholds taken from the checkpoint, when its training run chose them; + "per_image": each photo's
    detections and labels)."""
    pipeline = validate(cfg, ("eval",))["eval"]
    model, path, adopted = load_model(cfg, ckpt)
    dev = pick_device(device)
    model.to(dev).eval()
    evaluator = build_evaluator(cfg, pipeline, dev, is_accelerator(dev), inference_amp(cfg, dev.type),
                                progress, sweep, per_image)
    result = timed_run(evaluator, model, path)
    if adopted:
        result["thresholds_from_checkpoint"] = adopted
    return result


def evaluate_onnx_model(cfg: Config, onnx_path: str, device: str | None = None, progress: bool = False,
                        sweep: bool = False, per_image: bool = False) -> dict:
    """``textdet eval --onnx``: ``evaluate_checkpoint``'s keys plus "onnx"; needs no ``model`` section. The
    input is prepared on the CPU in fp32: ONNX Runtime takes numpy."""
    pipeline = validate(cfg, ("eval",), model=False)["eval"]
    cpu = torch.device("cpu")
    fp32 = amp_settings("O0", "cpu")
    evaluator = build_evaluator(cfg, pipeline, cpu, False, fp32, progress, sweep, per_image)
    return evaluate_onnx(evaluator, onnx_path, device=device)


CALIBRATION_PHOTOS = 64  # int8 calibration: evenly spaced photos of the split, at most this many


def calibration_photos(cfg: Config, source: str | None, limit: int = CALIBRATION_PHOTOS
                       ) -> tuple[list[str], str]:
    """Photos to calibrate an int8 model on, and where they came from: ``source`` (``--calib``: a folder of
    images, or a label file whose image names are read in the config's training image folder), else the
    config's training split; at most ``limit``, evenly spaced."""
    train = cfg.train.dataset
    image_dir = os.path.join(train.dataset_root, train.data_dir)
    if source is not None and os.path.isdir(source):
        paths, where = find_images([source]), f"the images in {source}"
    else:
        label_files = source if source is not None else train.label_file
        if not label_files:
            raise ConfigError("int8 calibration: train.dataset.label_file is not set; pass --calib DIR (a "
                              "folder of photos like the ones the model will read)")
        records, _ = read_label_files(label_files, "" if source is not None else train.dataset_root)
        paths = [os.path.join(image_dir, record.rel_path) for record in records]
        where = f"{source}" if source is not None else "the training split"
        missing = next((path for path in paths if not os.path.isfile(path)), None)
        if missing is not None:
            raise TextdetError(f"int8 calibration: {missing} (named in {label_files}) does not exist; the "
                               f"names are read in train.dataset's image folder {image_dir}, or pass "
                               "--calib DIR")
    if not paths:
        raise TextdetError(f"int8 calibration: no photos in {where}")
    step = max(len(paths) / max(limit, 1), 1.0)
    chosen = [paths[int(index * step)] for index in range(min(limit, len(paths)))]
    return chosen, f"{len(chosen)} of the {len(paths)} in {where}"


# ----------------------------------------------------------------------------------------------- the Detector
def preprocess_from_config(cfg: Config | None) -> Preprocess:
    """DecodeImage mode, DetResize and NormalizeImage of ``predict``'s (else ``eval``'s)
    ``transform_pipeline``; what is missing gets MindOCR's inference defaults (DetResize max 960, divisor 32;
    ImageNet normalisation of RGB)."""
    pipeline, key = None, None
    if cfg is not None:
        pipeline, key = cfg.predict.dataset.get("transform_pipeline"), "predict.dataset.transform_pipeline"
        if not pipeline:
            pipeline, key = cfg.eval.dataset.transform_pipeline, "eval.dataset.transform_pipeline"
    found: dict[type, Any] = {}
    if pipeline:
        with located(cfg, key):
            for transform in build_transforms(pipeline, fuse=False).transforms:
                found.setdefault(type(transform), transform)
    decode, norm = found.get(DecodeImage), found.get(NormalizeImage)
    return Preprocess(resize=found.get(DetResize) or DetResize(**INFER_RESIZE),
                      normalize=hwc_normalize(norm) if norm else NormalizeImage(),
                      img_mode=decode.img_mode if decode else "RGB")


def has_resize(cfg: Config) -> bool:
    """Whether the predict or eval pipeline names a DetResize (else inference uses its defaults)."""
    pipelines = (cfg.predict.dataset.get("transform_pipeline") or [],
                 cfg.eval.dataset.transform_pipeline or [])
    for pipeline in pipelines:
        for entry in pipeline:
            names = entry if isinstance(entry, dict) else {entry: None}
            if "DetResize" in names:
                return True
    return False


def build_detector(cfg: Config, ckpt: str | None = None, device: str | None = None, batch_size: int = 8,
                   shape_buckets: str | list | None = None, tile: TileSpec | None = None) -> Detector:
    """The DBNet of ``cfg.model`` with weights from ``ckpt`` (default: predict/eval ``ckpt_load_path``) on
    ``device`` (default: the accelerator if any), autocast per ``system.amp_level_infer``; pre/post-processing
    of ``cfg``; ``shape_buckets`` and ``tile`` default: the config's ``eval.shape_buckets``, ``eval.tile``::

        detector = build_detector(load_config("db_r50.yaml"), "runs/best.ckpt")
        result = detector("img.jpg")  # {"polys": [np.ndarray (P, 2) float32], "scores": [float]}
    """
    model, _, adopted = load_model(cfg, ckpt, PREDICT_CKPT_KEYS)
    detector = detector_for(cfg, model, device, batch_size, shape_buckets, tile)
    detector.thresholds_note = thresholds_note(adopted)
    return detector


def detector_for(cfg: Config, model: nn.Module, device: str | None = None, batch_size: int = 8,
                 shape_buckets: str | list | None = None, tile: TileSpec | None = None) -> Detector:
    """A Detector around ``model`` with ``cfg``'s pre/post-processing, run by ``inference_runtime``."""
    dev = pick_device(device)
    amp = inference_amp(cfg, dev.type)
    runtime = inference_runtime(cfg, dev, amp)
    if runtime == "onnxruntime":
        runner = OnnxModel.from_torch(model).run
    else:
        runner = TorchRunner(model, dev, amp)
    if shape_buckets is None:
        shape_buckets = cfg.eval.shape_buckets
    shrink_limit, _ = tile_advice(cfg)
    return Detector(runner, preprocess_from_config(cfg), build_postprocess_from_config(cfg), batch_size,
                    shape_buckets, tile or eval_tile(cfg), shrink_limit, runtime)


def build_onnx_detector(path: str, cfg: Config | None = None, device: str | None = None, batch_size: int = 8,
                        shape_buckets: str | list | None = None, tile: TileSpec | None = None) -> Detector:
    """``Detector.from_onnx`` with the pre/post-processing of ``cfg`` (None: MindOCR's inference defaults, and
    a fixed-size model is resized straight to its size); ``shape_buckets`` and ``tile`` default: ``cfg``'s
    ``eval.shape_buckets``, ``eval.tile``."""
    shrink_limit, _ = tile_advice(cfg)
    if cfg is None:
        return Detector.from_onnx(path, device=device, batch_size=batch_size, shape_buckets=shape_buckets,
                                  tile=tile, shrink_limit=shrink_limit)
    preprocess = preprocess_from_config(cfg)
    if shape_buckets is None:
        shape_buckets = cfg.eval.shape_buckets
    return Detector.from_onnx(path, postprocess=build_postprocess_from_config(cfg),
                              resize=preprocess.resize if has_resize(cfg) else None,
                              normalize=preprocess.normalize, img_mode=preprocess.img_mode, device=device,
                              batch_size=batch_size, shape_buckets=shape_buckets, tile=tile or eval_tile(cfg),
                              shrink_limit=shrink_limit)
