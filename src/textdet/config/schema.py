"""MindOCR's det YAML schema as typed dataclasses (its names, defaults and ``IGNORED_KEYS`` with reasons)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SystemConfig:
    mode: int = 0  # 0 = compiled (torch.compile), 1 = eager
    distribute: bool = False
    device_id: int = 0
    amp_level: str = "O0"
    amp_level_infer: str = "O0"
    infer_runtime: str = "auto"  # textdet: torch | onnxruntime | auto (onnxruntime on a CPU in fp32)
    amp_dtype: str | None = None  # textdet: bf16 | fp16 for amp O1-O3; absent = bf16 where the device has it
    seed: int = 42
    deterministic: bool = False  # textdet: deterministic kernels (bit-exact resume on a GPU, slower)
    log_level: str = "logging.INFO"
    log_interval: int = 100
    val_while_train: bool = False
    val_start_epoch: int = 1
    val_interval: int = 1
    ckpt_save_policy: str | None = "top_k"
    ckpt_max_keep: int = 10
    drop_overflow_update: bool = False
    refine_batch_size: bool = True


@dataclass
class ModelConfig:
    type: str = "det"
    transform: Any | None = None
    name: str | None = None  # a preset, e.g. dbnet_resnet50 (fills backbone/neck/head)
    backbone: dict = field(default_factory=dict)
    neck: dict = field(default_factory=dict)
    head: dict = field(default_factory=dict)
    resume: bool | str = False
    pretrained: bool | str | None = None


@dataclass
class SchedulerConfig:
    scheduler: str = "constant"
    lr: float = 0.01
    min_lr: float = 1e-6
    warmup_epochs: float = 3
    warmup_factor: float = 0.0
    decay_epochs: float = 10
    decay_rate: float = 0.9
    milestones: list = field(default_factory=list)
    num_epochs: int = 200
    num_cycles: int = 1
    cycle_decay: float = 1.0
    lr_epoch_stair: bool = False


@dataclass
class OptimizerConfig:
    opt: str = "adam"
    weight_decay: float = 0.0
    momentum: float = 0.9
    nesterov: bool = False
    filter_bias_and_bn: bool = True
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    lr: float | None = None  # MindOCR takes the LR from the scheduler; a value here is ignored
    loss_scale: float = 1.0
    grouping_strategy: str | None = None
    no_weight_decay_params: list = field(default_factory=list)
    # textdet: {part: factor} scales the learning rate of a top-level part (backbone, neck, head), e.g.
    # {backbone: 0.1} to fine-tune an imported detector's features more gently than its head
    lr_mult: dict = field(default_factory=dict)


@dataclass
class LossScalerConfig:
    type: str = "static"
    loss_scale: float = 1.0
    scale_factor: float = 2.0
    scale_window: int = 2000


@dataclass
class DatasetConfig:
    type: str = "DetDataset"
    dataset_root: str = ""
    data_dir: str = ""
    label_file: str | list | None = None
    sample_ratio: float = 1.0
    shuffle: bool | None = None
    transform_pipeline: list = field(default_factory=list)
    output_columns: list = field(default_factory=list)
    net_input_column_index: list = field(default_factory=lambda: [0])
    label_column_index: list = field(default_factory=list)
    meta_data_column_index: list = field(default_factory=list)
    use_minddata: bool = False
    cache_images: bool | str = "auto"  # textdet: decode each image once (shared memory); auto = if it fits
    # textdet: an epoch holds at least this many samples: a smaller set is passed over several whole times
    # (each pass its own random draws), so a schedule in epochs fits a few hundred photos and a few thousand
    min_epoch_samples: int = 0


@dataclass
class LoaderConfig:
    shuffle: bool = False
    batch_size: int = 1
    drop_remainder: bool = False
    num_workers: int = 2
    prefetch_size: int = 16
    max_rowsize: int = 64
    prefetch_factor: int = 2  # textdet: batches each worker keeps ready (PyTorch DataLoader)
    persistent_workers: bool = True  # textdet: keep workers between epochs


@dataclass
class TrainConfig:
    ckpt_save_dir: str = "./tmp_det"
    # textdet: train_resume.ckpt every N optimizer steps mid-epoch; auto = every 10 minutes; 0/off = epoch ends
    ckpt_interval_steps: int | bool | str = "auto"
    dataset_sink_mode: bool = False
    gradient_accumulation_steps: int = 1
    clip_grad: bool = False
    clip_norm: float = 1.0
    ema: bool = False
    ema_decay: float = 0.9999
    ema_resume: str = "keep"  # textdet: keep = EMA state restored on resume; reset = MindOCR's (EMA restarts)
    # textdet: window_end = an accumulated update takes its window's last micro-batch LR (MindOCR's intent);
    # mindocr = update k takes LR entry k, as MindOCR 0.5 on MindSpore 2.x does (a slower schedule)
    accumulation_lr: str = "window_end"
    max_bad_steps: int = 20  # textdet: stop after this many consecutive steps with non-finite loss/gradients
    # textdet: stop after this many steps in a row with a blank probability map (engine/health.py);
    # 0 = warn only
    max_blank_steps: int = 500
    # textdet: seconds without a finished step before the hang watchdog stops the run; auto = 600, then
    # 20x the median step (at least 60 s) once 20 steps are known
    step_timeout: float | str = "auto"
    targets_on_device: bool | str = "auto"  # textdet: DB maps built per batch on the device; auto = on cuda/npu/xpu
    freeze_bn: bool = False  # textdet: BatchNorms keep their running statistics (eval mode) while the rest trains
    freeze: list = field(default_factory=list)  # textdet: model parts that do not learn, e.g. [backbone]
    # textdet: share of the training photos set aside to compare each evaluated model with model.pretrained's
    # (the start guard, engine/guard.py); 0 = off
    guard_holdout: float = 0.0
    # textdet: the trained model is kept when it beats the start by this much there
    guard_margin: float = 0.01
    # textdet: ... and by at least this many of the text regions set aside (each is ~1/N of the f-score);
    # 0 = the margin alone
    guard_regions: int = 2
    # textdet: the set-aside photos also re-choose postprocess.binary_thresh/box_thresh for the trained model;
    # its checkpoints carry them and eval/predict/export use them
    guard_thresholds: bool = False
    pred_cast_fp32: bool | None = None
    max_call_depth: int | None = None
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    loader: LoaderConfig = field(default_factory=LoaderConfig)


@dataclass
class EvalConfig:
    ckpt_load_path: str | None = None
    dataset_sink_mode: bool = False
    pred_cast_fp32: bool | None = None
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    loader: LoaderConfig = field(default_factory=LoaderConfig)
    # textdet: pad each resized image to the smallest of a few [H, W] shapes (auto = chosen from the data set)
    shape_buckets: str | list | None = None
    # textdet: read pages larger than [H, W] at their own pixels in tiles of that size (None: shrink them)
    tile: list | None = None
    # textdet: pixels neighbouring tiles share (None: a fifth of the tile, /32)
    tile_overlap: int | None = None


@dataclass
class PredictConfig:
    ckpt_load_path: str | None = None
    output_save_dir: str = "./predict_out"
    dataset: dict = field(default_factory=dict)
    loader: dict = field(default_factory=dict)


@dataclass
class Config:
    """The whole run: one attribute per MindOCR section."""

    system: SystemConfig = field(default_factory=SystemConfig)
    common: dict = field(default_factory=dict)
    model: ModelConfig = field(default_factory=ModelConfig)
    postprocess: dict = field(default_factory=lambda: {"name": "DBPostprocess"})
    metric: dict = field(default_factory=lambda: {"name": "DetMetric", "main_indicator": "f-score"})
    loss: dict = field(default_factory=lambda: {"name": "DBLoss"})
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    loss_scaler: LossScalerConfig = field(default_factory=LossScalerConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    predict: PredictConfig = field(default_factory=PredictConfig)


# Keys MindOCR reads that have no PyTorch meaning: accepted, reported once, never silently dropped.
# Paths use "*" for "any dataset/loader section".
IGNORED_KEYS: dict[str, str] = {
    "system.device_id": "PyTorch picks the device: use --device or CUDA_VISIBLE_DEVICES (torchrun sets LOCAL_RANK)",
    "system.refine_batch_size": "textdet evaluates every sample at any eval batch size; no batch refinement needed",
    "model.transform": "MindOCR's model-level input transform; textdet's DBNet has none",
    "optimizer.loss_scale": "MindOCR fixes the optimizer's loss scale at 1.0; gradient scaling comes from loss_scaler",
    "optimizer.lr": "the learning rate comes from scheduler.lr (as in MindOCR)",
    "optimizer.grouping_strategy": "only MindOCR's default grouping exists for DBNet (filter_bias_and_bn)",
    "train.pred_cast_fp32": "textdet always computes losses in fp32",
    "*.dataset_sink_mode": "textdet always prefetches to an accelerator (pinned memory, side stream, on-device "
                           "normalisation); the CPU has nothing to sink into",
    "system.drop_overflow_update": "textdet always skips steps with non-finite gradients (see train.max_bad_steps)",
    "train.max_call_depth": "MindSpore graph recursion limit; no PyTorch meaning",
    "eval.pred_cast_fp32": "textdet always post-processes fp32 probability maps",
    "*.dataset.use_minddata": "MindData C++ ops; textdet's transforms already run as native OpenCV/numpy code",
    "*.dataset.meta_data_column_index": "textdet passes every output column to the evaluator by name",
    "*.loader.prefetch_size": "MindSpore's queue depth; PyTorch workers prefetch loader.prefetch_factor batches each",
    "*.loader.max_rowsize": "MindSpore shared-memory row size; PyTorch sizes shared memory itself",
    "train.dataset.shuffle": "shuffling is train.loader.shuffle",
    "eval.dataset.shuffle": "evaluation order does not change the metric",
    "eval.dataset_sink_mode": "evaluation feeds batches to the device the same way in either mode",
    "predict.output_save_dir": "`textdet predict` writes to its --out folder",
    "predict.loader": "`textdet predict` batches images itself (--batch-size)",
}
