"""What each config key means: the text of the generated configuration reference (reference/config.md).

Types and defaults come from ``textdet/config/schema.py``; this table holds what the code cannot say: what the
key means in MindOCR and what textdet does with it. Keys are dotted paths as in ``-o``; ``*.dataset.KEY`` and
``*.loader.KEY`` stand for both ``train.`` and ``eval.``. A test (tests/test_docs_reference.py) fails when a
schema key has no entry here, or an entry names no schema key. Links are relative to reference/config.md.
"""

from __future__ import annotations

# Keys MindOCR does not have: marked "textdet" in the reference.
TEXTDET_ONLY: set[str] = {
    "system.amp_dtype", "system.infer_runtime", "system.deterministic", "optimizer.lr_mult", "train.ckpt_interval_steps", "train.ema_resume",
    "train.accumulation_lr", "train.max_bad_steps", "train.max_blank_steps", "train.step_timeout",
    "train.targets_on_device",
    "train.freeze_bn", "train.freeze", "train.guard_holdout", "train.guard_margin", "train.guard_regions",
    "train.guard_thresholds", "*.dataset.cache_images", "*.dataset.min_epoch_samples", "*.loader.prefetch_factor",
    "*.loader.persistent_workers", "eval.shape_buckets", "eval.tile", "eval.tile_overlap",
}

KEYS: dict[str, str] = {
    # system
    "system.mode": (
        "MindSpore's 0 = graph mode, 1 = PyNative. In textdet 0 compiles the training step with `torch.compile` on "
        "CUDA: forward and DB loss (OHEM included) as one graph with `fullgraph=True` (a graph break fails the "
        "first step) and static shapes (a last partial batch: one recompile); on the CPU and other accelerators it "
        "runs eager with a notice (`--compile on` forces compiling). 1: eager. The compiled step ran on an H200 "
        "with torch 2.11 (one graph, no recompile) with a first version of today's OHEM tie-break; the shipped one "
        "and the persistent cache across processes have not yet run on a GPU."),
    "system.distribute": (
        "Data-parallel training. In textdet: DDP under `torchrun --nproc_per_node=N -m textdet train -c CFG` (gloo "
        "on the CPU is tested; nccl ran at world size 1 on an H200; several GPUs not yet run). See "
        "[Several GPUs or nodes](../guides/distributed.md)."),
    "system.device_id": "MindSpore's device index.",
    "system.amp_level": (
        "Mixed precision. O0 fp32; O1/O2 autocast (bf16 or fp16 on accelerators, both ran on an H200; bf16 on the "
        "CPU), with sigmoids, BatchNorm and losses in fp32 (BCE from logits); O3 runs as O2 (fp32 master weights), "
        "with a notice. On a CPU without native bf16 (no AVX512-BF16 or AMX: `textdet doctor` says) bf16 is "
        "emulated, about 8x slower than fp32, and O1-O3 there log a warning. textdet adds `auto` (the built-in "
        "recipe's): O2 where half precision is native, O0 on such a CPU; the banner's `AMP level` line says which."),
    "system.amp_level_infer": (
        "The precision of evaluation and prediction (`eval`, `predict`, the Python `Detector`), with the same "
        "levels as `amp_level`."),
    "system.infer_runtime": (
        "What runs the model in evaluation and prediction (`eval`, `predict`, the `Detector` that `build_detector` "
        "makes, the evaluations during training): `torch`, `onnxruntime` (the model traced to ONNX in memory at "
        "each evaluation, a second or two, and run by ONNX Runtime; needs `pip install onnxruntime`), or `auto` "
        "(default): ONNX Runtime on a CPU when the inference precision is fp32 and onnxruntime is installed, "
        "PyTorch everywhere else. On a CPU ONNX Runtime's fused kernels run the same model faster and give the "
        "same maps ([why](../decisions/cpu-inference.md)); `textdet eval` and `predict` print which ran."),
    "system.amp_dtype": (
        "The half type of O1-O3: `bf16` or `fp16`; absent: bf16 where the device supports it (the CPU; CUDA from "
        "A100 on; Ascend 910B), fp16 otherwise; `textdet doctor` says which. Loss scaling runs with fp16 only. "
        "bf16 on a device without it is an error. On an H200: bf16 by default, fp16 with scaling when asked "
        "([Benchmarks, GPU](../BENCHMARKS.md#gpu))."),
    "system.seed": "The random seed of weights, data order and augmentations, as in MindOCR.",
    "system.deterministic": (
        "`true`: deterministic kernels only (`torch.use_deterministic_algorithms`, cuDNN without autotuning) for a "
        "bit-exact resume on a GPU; slower (by how much is not measured: not yet run on a GPU). On the CPU a "
        "resume is exact without it."),
    "system.log_level": "`logging.INFO`, `WARNING`, ...: the level of `train.log` and the console.",
    "system.log_interval": (
        "Steps between two step lines in the log, as in MindOCR (see "
        "[Reading a step line](../guides/profiling.md#reading-a-step-line))."),
    "system.val_while_train": "Evaluate on the `eval` set during training, as in MindOCR.",
    "system.val_start_epoch": "The first epoch that is evaluated, as in MindOCR.",
    "system.val_interval": "Evaluate every N epochs, as in MindOCR; textdet also evaluates the last epoch "
                           "(MindOCR does not), as MMEngine's loop does.",
    "system.ckpt_save_policy": (
        "Which epoch checkpoints `e{N}.ckpt` are kept, as in MindOCR: `top_k` the best by the main indicator, "
        "`latest_k` the newest."),
    "system.ckpt_max_keep": "How many epoch checkpoints are kept, as in MindOCR.",
    "system.drop_overflow_update": (
        "MindOCR: skip an update whose gradients overflowed. textdet always does: a step with a non-finite loss or "
        "gradient is skipped, counted (`skipped steps` in the log, `skipped_steps` in metrics.jsonl), BatchNorm "
        "statistics restored; see `train.max_bad_steps`."),
    "system.refine_batch_size": "MindOCR shrinks the eval batch to fit the data set.",
    # model
    "common": "MindOCR's section of shared values, referenced elsewhere through YAML anchors; read as it is.",
    "model.type": "The task: `det` (the only one).",
    "model.transform": "MindOCR's model-level input transform.",
    "model.name": (
        "A MindOCR preset such as `dbnet_resnet50`, which fills `backbone`, `neck` and `head`; "
        "`model.pretrained: True` then takes MindOCR's model-zoo checkpoint for it."),
    "model.backbone": (
        "`name` (det_resnet18/34/50, det_mobilenet_v3, PPLCNetV3, PPLCNetV4) and its parameters, `pretrained` "
        "(True: torchvision's ImageNet file; a path or URL; false); see [Components](#components)."),
    "model.neck": "`name` (DBFPN, RSEFPN, RepLKFPN) and its parameters; see [Components](#components).",
    "model.head": "`name` (DBHead) and its parameters; see [Components](#components).",
    "model.resume": (
        "`True`: continue from `ckpt_save_dir/train_resume.ckpt` (a first run without one starts fresh); a path: "
        "that file, which must exist (a typo is an error naming the key and the path). Another number of "
        "processes, batch size or accumulation continues after the same samples (see "
        "[Troubleshooting](../guides/troubleshooting.md))."),
    "model.pretrained": (
        "Weights for the whole network: a path, a URL (downloaded into the torch hub cache, hash checked) or "
        "`True` (MindOCR's model-zoo checkpoint for a preset). Loaded non-strictly: a file that fits under half of "
        "the network's tensors is refused, a partial fit is a warning with the counts."),
    "postprocess": "`name: DBPostprocess` and its parameters; see [Components](#components).",
    "metric": "`name: DetMetric`, `main_indicator` (f-score); see [Components](#components).",
    "loss": "`name: DBLoss` and its parameters; see [Components](#components).",
    # scheduler
    "scheduler.scheduler": (
        "The learning-rate schedule, by every one of MindOCR's names (`constant`, `warmup_cosine_decay`, ...). "
        "Every schedule equals MindOCR's `create_scheduler` list bit for bit; with "
        "gradient accumulation an update takes its window's last learning rate (see `train.accumulation_lr`)."),
    "scheduler.lr": "The peak learning rate, as in MindOCR.",
    "scheduler.min_lr": "The lowest learning rate of a decaying schedule, as in MindOCR.",
    "scheduler.warmup_epochs": "Epochs of linear warm-up (fractions allowed), as in MindOCR.",
    "scheduler.warmup_factor": "The warm-up's starting learning rate as a share of `lr`, as in MindOCR.",
    "scheduler.decay_epochs": "Epochs over which the learning rate decays, as in MindOCR.",
    "scheduler.decay_rate": "The decay factor (polynomial power, step factor), as in MindOCR.",
    "scheduler.milestones": "Epochs at which `multi_step_decay` lowers the rate, as in MindOCR.",
    "scheduler.num_epochs": "Epochs to train, as in MindOCR.",
    "scheduler.num_cycles": "Restarts of a cyclic cosine schedule, as in MindOCR.",
    "scheduler.cycle_decay": "The peak's factor from one cycle to the next, as in MindOCR.",
    "scheduler.lr_epoch_stair": "`true`: the rate changes once an epoch, not every step, as in MindOCR.",
    # optimizer
    "optimizer.opt": (
        "The optimizer, by MindOCR's names: `sgd`, `momentum`, `nesterov`, `adam`, `adamw`, `nadam`, `rmsprop`, "
        "`adagrad`."),
    "optimizer.weight_decay": "Weight decay, as in MindOCR.",
    "optimizer.momentum": "SGD momentum, as in MindOCR.",
    "optimizer.nesterov": "Nesterov momentum, as in MindOCR.",
    "optimizer.filter_bias_and_bn": "No weight decay on biases and BatchNorm weights, as in MindOCR.",
    "optimizer.beta1": "Adam's first-moment decay, as in MindOCR.",
    "optimizer.beta2": "Adam's second-moment decay, as in MindOCR.",
    "optimizer.eps": "Adam's epsilon, as in MindOCR.",
    "optimizer.lr": "MindOCR takes the rate from the scheduler.",
    "optimizer.loss_scale": "MindOCR's optimizer-side loss scale.",
    "optimizer.grouping_strategy": "MindOCR's parameter grouping by model.",
    "optimizer.no_weight_decay_params": "Parameter names (substrings) without weight decay, as in MindOCR.",
    "optimizer.lr_mult": (
        "`{part: factor}`: a top-level part (`backbone`, `neck`, `head`) learns at the scheduler's rate times its "
        "factor, e.g. `{backbone: 0.1}` (layer-wise learning rates, as MMOCR's `paramwise_cfg`); an unknown part "
        "is an error listing the model's parts."),
    # loss scaler
    "loss_scaler.type": (
        "`static` or `dynamic` loss scaling with MindOCR's scale, factor and window, active for fp16 only, so on "
        "accelerators only: on an H200 an injected overflow skipped the step and halved the scale (the tests run "
        "it on the CPU in fp32)."),
    "loss_scaler.loss_scale": "The starting scale, as in MindOCR.",
    "loss_scaler.scale_factor": "How much a dynamic scale shrinks on overflow and grows after a window, as in MindOCR.",
    "loss_scaler.scale_window": "Steps without overflow before a dynamic scale grows, as in MindOCR.",
    # train
    "train.ckpt_save_dir": (
        "The run folder: `train_config.yaml`, `train.log`, `metrics.jsonl`, `startup.json`, checkpoints, "
        "`curves.png`; MindOCR's names."),
    "train.ckpt_interval_steps": (
        "`train_resume.ckpt` also mid-epoch: every N optimizer steps; `auto` (default) every 10 minutes, so only "
        "epochs longer than that get them; `0`/`off`: epoch ends only."),
    "train.dataset_sink_mode": "MindSpore's data sinking.",
    "train.gradient_accumulation_steps": "Micro-batches per optimizer step, as in MindOCR.",
    "train.clip_grad": "Clip the gradient norm, as in MindOCR.",
    "train.clip_norm": "The largest gradient norm with `clip_grad`, as in MindOCR.",
    "train.ema": "Keep an exponential moving average of the weights, as in MindOCR; its state is saved and restored.",
    "train.ema_decay": "The EMA's decay, as in MindOCR.",
    "train.ema_resume": (
        "`keep` (default): the EMA state comes back on resume; `reset`: MindOCR's behaviour, the EMA restarts from "
        "the resumed weights."),
    "train.accumulation_lr": (
        "With gradient accumulation, which learning rate an update takes: `window_end` (default) the last "
        "micro-batch of its window, as MindOCR's train step intends; `mindocr`: update k takes entry k of the "
        "list, as MindOCR 0.5 on MindSpore 2.x does (its warm-up and decay then run "
        "`gradient_accumulation_steps` times slower; [Benchmarks](../BENCHMARKS.md#mindocr-parity))."),
    "train.max_bad_steps": (
        "Stop after this many skipped steps (non-finite loss or gradients) in a row, naming the last good "
        "checkpoint."),
    "train.max_blank_steps": (
        "Stop after this many steps in a row (as the step lines count them) in which the probability map, after it "
        "had marked the text, stays under `postprocess.binary_thresh` on every text pixel, naming the epoch "
        "checkpoints written before; the first such step line warns. `0`: warn only. A blank map finds no text and "
        "Dice's gradient vanishes there, so such a run seldom comes back (lower `scheduler.lr`)."),
    "train.step_timeout": (
        "Seconds without a finished step before the hang watchdog stops the run and names the slow rank; `auto`: "
        "10 minutes, then 20x the median step (at least 60 s) once 20 steps are known."),
    "train.targets_on_device": (
        "On a GPU the DB targets are built per batch on the device: the loader workers only decode, warp and pack "
        "each sample's polygons, and the maps are made with batched torch ops on the prefetch stream. `auto`: on "
        "for cuda/npu/xpu (not yet run on a GPU); `true` forces it (also on the CPU, slowly); `false` keeps "
        "ShrinkBinaryMap/BorderMap in the workers. On the CPU the maps equal the worker ones pixel for pixel for "
        "polygons inside the crop; the threshold map differs by < 1e-6 on average and its mask by about 1% of "
        "its pixels."),
    "train.freeze_bn": (
        "`true`: every BatchNorm keeps its loaded running statistics while the rest trains (fine-tuning an "
        "imported model; the PP-OCR YAMLs set it)."),
    "train.freeze": (
        "Model parts that do not learn, e.g. `[backbone]` or `[backbone, neck]`, or a dotted path inside one, "
        "e.g. `[backbone.conv1, backbone.blocks2]` (the first stages only, as MMDetection's `frozen_stages`; an "
        "unknown name lists the parts at its level): they run forward only (a frozen backbone: 2.0x to 2.7x more "
        "crops a minute on a CPU). The PP-OCR YAMLs freeze nothing: on real photos the frozen parts kept the "
        "fine-tuned detector from ICDAR2015's word boxes."),
    "train.guard_holdout": (
        "The start guard: this share of the training photos (0.1: every 10th line of the label file) is set "
        "aside, never trained on; at each evaluation the trained model and the one `model.pretrained` names are "
        "scored on them, and the trained one is kept only when it scores `train.guard_margin` higher; otherwise "
        "that evaluation and the epoch's checkpoints hold the starting weights (training goes on from the trained "
        "ones). Fine-tuning then never hands back a model worse than its start on photos it did not learn from. "
        "0 turns it off; the PP-OCR YAMLs write 0.1."),
    "train.guard_margin": (
        "How much higher (f-score) the trained model must score on the set-aside photos to be kept."),
    "train.guard_regions": (
        "...and about how many text regions of the set-aside photos that win must be worth: finding one more of "
        "their N regions raises the f-score by about 1/N, so the least win is the larger of `guard_margin` and "
        "`guard_regions` / N. The log prints N and the least win, `metrics.jsonl` has it as `guard_least_win`, "
        "and `textdet check-data` prints it before training. On a few pages one line is noise (6 handwritten "
        "pages hold 89 lines: 0.01 is about one of them). 0 leaves `guard_margin` alone."),
    "train.guard_thresholds": (
        "`true`: the set-aside photos also re-choose `postprocess.binary_thresh` and `box_thresh` for the trained "
        "model (the best pair of a 9 x 9 grid, 0.1 to 0.7 and 0.3 to 0.93; among equal ones, the nearest to the "
        "config's pair); the two models are compared at their best pairs, the evaluation scores the kept trained "
        "model at its pair, and its checkpoints carry it: `eval`, `predict` and the Python `Detector` use it, "
        "`export` prints it (an ONNX file holds no thresholds), and `-o postprocess.binary_thresh=...` overrides. "
        "The imported model keeps the config's pair. The PP-OCR YAMLs write `true`."),
    "train.pred_cast_fp32": "MindOCR casts predictions to fp32 for the loss.",
    "train.max_call_depth": "MindSpore's graph recursion limit.",
    # datasets (train and eval)
    "*.dataset.type": "`DetDataset`: a MindOCR/PaddleOCR label file and an image folder.",
    "*.dataset.dataset_root": "The folder that `data_dir` and `label_file` are relative to, as in MindOCR.",
    "*.dataset.data_dir": "The image folder, relative to `dataset_root`, as in MindOCR.",
    "*.dataset.label_file": (
        "The label file (or a list of them), relative to `dataset_root`: `image<TAB>[{\"transcription\": ..., "
        "\"points\": [[x, y], ...]}]`, `###` = ignore; see [Your labels](../guides/labels.md)."),
    "*.dataset.sample_ratio": "The share of the label file's lines used, as in MindOCR.",
    "*.dataset.shuffle": "MindOCR's dataset-level shuffle.",
    "*.dataset.transform_pipeline": (
        "The transforms, by MindOCR's names and parameters, in order; see [Components](#components). "
        "`-o` addresses a transform by name (preferred): "
        "`-o \"eval.dataset.transform_pipeline.DetResize.target_size=[320,320]\"` sets the first "
        "DetResize of that pipeline, wherever a YAML puts it (the `predict` section's pipeline too). "
        "By position, `transform_pipeline.2.DetResize.target_size` works as well; an entry 2 that holds "
        "another transform is an error listing the transforms with their positions, never a value set "
        "inside it."),
    "*.dataset.output_columns": "The sample's fields handed on, by MindOCR's names (`image`, `binary_map`, ...).",
    "*.dataset.net_input_column_index": "Which output column is the network's input, as in MindOCR.",
    "*.dataset.label_column_index": "Which output columns the loss takes, as in MindOCR.",
    "*.dataset.meta_data_column_index": "MindOCR's evaluation metadata columns.",
    "*.dataset.use_minddata": "MindData's C++ transforms.",
    "*.dataset.cache_images": (
        "`auto` (default): decode each image once into shared memory when the set fits in a quarter of free RAM "
        "(shared by the processes of a machine under torchrun); `true` / `false`. The space is reserved at start "
        "for every local process's copy: too small a `/dev/shm` is an error then (or, with `auto`, no cache and a "
        "warning), never a crash in epoch 1."),
    "*.dataset.min_epoch_samples": (
        "An epoch holds at least this many samples: a smaller set is passed over several whole times (each pass "
        "its own random draws), so a schedule in epochs fits a few hundred photos and a few thousand. 0: one "
        "pass."),
    # loaders (train and eval)
    "*.loader.shuffle": "Shuffle the training order each epoch, as in MindOCR.",
    "*.loader.batch_size": (
        "Images per batch and process. For evaluation any size (MindOCR requires 1): images of different sizes in "
        "one batch are padded to the batch's largest height and width (or to their bucket, `eval.shape_buckets`) "
        "and the padding is masked out of the probability map."),
    "*.loader.drop_remainder": "Drop a last incomplete training batch, as in MindOCR.",
    "*.loader.num_workers": "Loader worker processes, capped at the cores per process, as MindOCR does.",
    "*.loader.prefetch_size": "MindSpore's queue depth.",
    "*.loader.max_rowsize": "MindSpore's shared-memory row size.",
    "*.loader.prefetch_factor": "Batches each worker keeps ready (PyTorch's DataLoader).",
    "*.loader.persistent_workers": "Keep the loader workers between epochs (PyTorch's DataLoader).",
    # eval and predict
    "eval.ckpt_load_path": "The checkpoint `textdet eval` scores when `--ckpt` is not given, as in MindOCR.",
    "eval.dataset_sink_mode": "MindSpore's data sinking.",
    "eval.pred_cast_fp32": "MindOCR casts predictions to fp32.",
    "eval.shape_buckets": (
        "Absent (default): each eval image at its own resized size. `auto`: up to 4 shapes chosen from the eval "
        "set's resized sizes (fewest padded pixels); `[[H, W], ...]`: those shapes. Each image, resized by the "
        "pipeline's DetResize, is padded bottom/right to the smallest shape that holds it, a batch holds one "
        "shape, and the padding is masked out of the probability map before post-processing (boxes from the real "
        "region only, scaled back to the original image). `textdet eval` prints the number of distinct input "
        "shapes (`input_shapes` with `--json`). `textdet predict` uses the same buckets (`--shape-buckets auto` "
        "or `736x1280,1280x736` overrides)."),
    "eval.tile": (
        "Absent (default): every page is resized by the pipeline's DetResize. `[H, W]`: a page larger than that "
        "is not shrunk whole but read in overlapping tiles of H x W of its pixels, each tile resized at the scale "
        "DetResize gives an image of that size (tiles the size of the photos the detector reads well read a page "
        "of such photos as it reads each). The tiles' probability maps are stitched into one map of the page "
        "(each pixel from the tile it lies deepest in) and post-processed once, so a word cut by a tile edge "
        "comes out once. A page that fits in one tile is read exactly as without tiles. `textdet eval --tile HxW` "
        "and `textdet predict --tile HxW` set it; the evaluations during training use it too."),
    "eval.tile_overlap": (
        "Page pixels neighbouring tiles share (`--overlap`). Absent: a fifth of the tile's shorter side, rounded "
        "down to a multiple of 32 (128 for 640 x 640 tiles). Under the tile's shorter side."),
    "predict.ckpt_load_path": "The checkpoint `textdet predict` and `export` use when `--ckpt` is not given.",
    "predict.output_save_dir": "MindOCR's prediction folder.",
    "predict.dataset": "MindOCR's prediction data set; `textdet predict` takes its inputs on the command line.",
    "predict.loader": "MindOCR's prediction loader.",
}

# Parameters of components (model parts, loss, post-processing) that differ from MindOCR or are textdet's own:
# "Component.parameter" -> meaning. The other parameters follow MindOCR's meaning.
COMPONENT_NOTES: dict[str, str] = {
    "DBHead.step": (
        "`paper` (default): B = sigmoid(k(P - T)); `mindocr`: MindOCR's sigmoid(kP - T), to train exactly as "
        "MindOCR does."),
    "DBLoss.ohem": (
        "Which hard negatives balanced BCE keeps: `topk` (default) exactly 3 x the positives, ties in pixel "
        "order; `mindocr`: every negative tied with the k-th hardest too, at least 10 an image, the sum still "
        "divided by k, the BCE computed from P rather than its logits, as MindOCR 0.5's BalancedBCELoss does. "
        "Ties come from padded or flat regions: on the padded synthetic crops of the MindOCR training comparison "
        "the two rules' BCE terms differed by up to 25% ([Benchmarks](../BENCHMARKS.md#mindocr-parity))."),
    "DBLoss.gap_weight": (
        "A penalty that pushes the probability map down in the band around each labelled word (the PP-OCR YAMLs "
        "write 0.1): an imported map saturated in the gaps between words gets a gradient there."),
}
