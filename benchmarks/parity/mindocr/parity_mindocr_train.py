"""Training parity with MindOCR: the same checkpoint and batches through MindOCR's training step and textdet's.

One checkpoint, written by MindSpore from MindOCR's network (random init); a fixed list of batches (the user's
training transforms run once on synthetic ICDAR-layout images, the arrays fed to both sides with no further
randomness); then ``--steps`` optimizer steps on each side with the user's config
(configs/mindocr_db_r50_user.yaml) as is: SGD momentum 0.9, weight decay 1e-4 on every parameter, lr 0.007,
polynomial decay after a 3-epoch warm-up, fp32, batch 1. MindOCR's side is its own ``tools/train.py`` wiring:
``build_loss``, ``NetWithLossWrapper``, ``create_scheduler``, ``create_group_params``, ``create_optimizer``,
``get_loss_scales``, ``EMA`` and ``TrainOneStepWrapper``. textdet's side is its ``Trainer`` (``train_step`` /
``optimizer_step``) built from the same YAML with ``model.head.step: mindocr`` (MindOCR's ``sigmoid(kP - T)``)
and ``loss.ohem: mindocr`` (MindOCR's OHEM, which keeps every negative tied with the k-th hardest).

Cases: ``sgd`` (the config as is), ``accum2`` (``train.gradient_accumulation_steps: 2``, so 2x the micro-batches;
textdet with ``train.accumulation_lr: mindocr``, the LR entry MindOCR 0.5 takes on MindSpore 2.x),
``ema`` (``train.ema: True``; the EMA weights are compared too), ``adam_cosine`` (db_r50_icdar15_8p.yaml's
optimizer and schedule: Adam, warmup_cosine_decay lr 0.001 -> 1e-5). Per step: the loss and its three terms
(computed on both sides before the step), the LR each side used, max |weight difference| after the step
(parameters and BatchNorm statistics). ``--json``: one object, per case ``max_loss_rel``, ``max_lr_abs``,
``max_weight_abs``, plus the same for textdet's defaults (``head_paper_*``: the paper's head step and exact-count
OHEM; the size of those differences).

The network: the user's DBNet-ResNet-50 layout (Bottleneck blocks 3-4-6-3, DBFPN, DBHead k 50, no bias) at
``--width`` stem channels (64 real, 8 here) and ``--neck`` FPN channels (256 real, 32 here) so that 4 cases x
20 steps x 2 frameworks run in minutes on 2 CPU cores; ``--width 64 --neck 256`` is the real size.
``--crop`` (default 640, the user's) sets RandomCropWithBBox's size; ``--pretrain N`` (default 20) trains the
network N Adam steps in textdet before MindSpore writes the checkpoint (0: MindOCR's random init, whose ResNet-50
in training mode is badly conditioned: its fp32 loss is 0.7% off its own fp64 loss).
``--steps-per-epoch`` (default 1012: the user's 1012 training images at batch 1) sets where warm-up ends; the
user's run is then all warm-up (warmup_epochs 3 > num_epochs 1) and the LR stays below 5e-5 for 20 steps, so
``--steps-per-epoch 4 --num-epochs 10`` is the stress run: warm-up done after 12 micro-batches, then decay.

Run in the MindOCR environment (venv in benchmarks/parity/mindocr/parity_mindocr.py; never in CI), from the
repository root:

    OMP_NUM_THREADS=2 PYTHONPATH=src ~/venvs/mindocr/bin/python benchmarks/parity/mindocr/parity_mindocr.py \\
        --train [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import addict
import mindspore as ms
import numpy as np
import torch
import yaml
from mindocr.losses import build_loss as ms_build_loss
from mindocr.optim import create_group_params, create_optimizer
from mindocr.scheduler import create_scheduler
from mindocr.utils.ema import EMA
from mindocr.utils.loss_scaler import get_loss_scales
from mindocr.utils.model_wrapper import NetWithLossWrapper
from mindocr.utils.train_step_wrapper import TrainOneStepWrapper
from mindspore import nn
from parity_mindocr_common import USER_CONFIG, MsDBNet, load_into_mindspore  # this folder's parity helpers

from textdet.build.parts import build_dataset, build_model_from_config, build_pipeline
from textdet.build.training import build_loss_from_config, build_trainer
from textdet.config import load_config
from textdet.data.dataset import collate
from textdet.data.targets import LOSS_COLUMNS
from textdet.engine.ema import ModelEMA
from textdet.models.ms_ckpt import mindspore_to_torch_names
from textdet.runtime.checkpoint import load_weights

CASES = {
    "sgd": {},
    # MindOCR 0.5 on MindSpore 2.x: update k takes LR entry k (train.accumulation_lr: mindocr, textdet's option)
    "accum2": {"train.gradient_accumulation_steps": 2, "train.accumulation_lr": "mindocr"},
    "ema": {"train.ema": True},
    # configs/det/dbnet/db_r50_icdar15_8p.yaml: Adam (no weight_decay key: 0) and warm-up + cosine
    "adam_cosine": {"optimizer.opt": "adam", "optimizer.weight_decay": 0.0, "scheduler.scheduler":
                    "warmup_cosine_decay", "scheduler.lr": 0.001, "scheduler.min_lr": 1e-5,
                    "scheduler.decay_epochs": 1150},
}
LIMITS = {"loss_rel": 1e-4, "lr_abs": 1e-9, "weight_abs": 1e-4}  # issue 28's "done when"
TERMS = ("loss", "loss_prob", "loss_thresh", "loss_binary")


def overrides(args: argparse.Namespace, case: dict, data_root: str, run_dir: str, head_step: str) -> list[str]:
    """-o overrides of the user's config: data, no downloads, the narrow network, the case's settings."""
    opts = {"train.dataset.dataset_root": data_root, "eval.dataset.dataset_root": data_root,
            "model.backbone.pretrained": False, "model.resume": False, "train.ckpt_save_dir": run_dir,
            "model.backbone.width": args.width, "model.neck.out_channels": args.neck, "model.head.step": head_step,
            "loss.ohem": "mindocr" if head_step == "mindocr" else "topk",  # with the head: MindOCR or textdet
            "train.loader.num_workers": 0, "system.val_while_train": False,
            "scheduler.num_epochs": args.num_epochs,
            "train.dataset.transform_pipeline.RandomCropWithBBox.crop_size": f"[{args.crop}, {args.crop}]", **case}
    return [f"{key}={value:.10e}" if isinstance(value, float) else f"{key}={value}" for key, value in opts.items()]


def make_batches(cfg, count: int) -> list[dict]:
    """``count`` batches of the user's pipeline (batch size 1), run once: both sides get these very arrays."""
    dataset = build_dataset(cfg, "train", build_pipeline(cfg, "train"))
    size = cfg.train.loader.batch_size
    batches = []
    for step in range(count):
        samples = [dataset[(0, (step * size + i) % len(dataset))] for i in range(size)]
        batch = collate(samples)
        batches.append({key: batch[key].float().numpy() for key in ("image", *LOSS_COLUMNS)})
    return batches


def is_bn_statistic(name: str) -> bool:
    """BatchNorm running mean/variance (textdet's names): compared relative to their size, apart from weights."""
    return name.endswith(("running_mean", "running_var"))


def mindspore_state(net: nn.Cell) -> dict[str, np.ndarray]:
    """Every MindSpore parameter (BN statistics too) under textdet's name."""
    out = {}
    for name, param in net.parameters_and_names():
        (key,), _ = mindspore_to_torch_names({name: None})
        out[key] = param.asnumpy().astype(np.float64)
    return out


def ema_state(ema: EMA) -> dict[str, np.ndarray]:
    out = {}
    for param in ema.ema_weight:
        (key,), _ = mindspore_to_torch_names({param.name.removeprefix("ema."): None})
        out[key] = param.asnumpy().astype(np.float64)
    return out


def spill(state: dict[str, np.ndarray], folder: str) -> str:
    """A state written to ``folder`` as float32 (a full-width ResNet-50's 20 float64 states are 4 GB a side in
    memory); float32 keeps textdet fp64's weights to 6e-8 relative, far below the differences measured."""
    handle, path = tempfile.mkstemp(suffix=".npz", dir=folder)
    os.close(handle)
    np.savez(path, **{key: value.astype(np.float32) for key, value in state.items()})
    return path


def unspill(path: str) -> dict[str, np.ndarray]:
    with np.load(path) as arrays:
        return {key: arrays[key].astype(np.float64) for key in arrays.files}


def mindocr_config(case: dict, num_epochs: int) -> addict.Dict:
    """The user's YAML as MindOCR reads it (anchors resolved, addict), the case's keys set."""
    with open(USER_CONFIG) as f:
        raw = yaml.safe_load(f)
    for key, value in {**case, "scheduler.num_epochs": num_epochs}.items():
        node = raw
        *parents, leaf = key.split(".")
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    return addict.Dict(raw)


def run_mindspore(cfg: addict.Dict, ckpt: str, batches: list[dict], steps_per_epoch: int, width: int,
                  neck: int, folder: str) -> list[dict]:
    """MindOCR's tools/train.py wiring, one TrainOneStepWrapper call per micro-batch; a record per update."""
    net = MsDBNet(width, neck)
    ms.load_param_into_net(net, ms.load_checkpoint(ckpt), strict_load=True)
    loss_cfg = {key: value for key, value in cfg.loss.items() if key != "name"}
    loss_fn = ms_build_loss(cfg.loss.name, **loss_cfg)
    net_with_loss = NetWithLossWrapper(net, loss_fn, input_indices=[0], label_indices=[1, 2, 3, 4])
    loss_scale_manager, optimizer_loss_scale = get_loss_scales(cfg)
    lrs = create_scheduler(steps_per_epoch, **cfg.scheduler.to_dict())
    optim_cfg = {**cfg.optimizer.to_dict(), "lr": lrs, "loss_scale": optimizer_loss_scale}
    optimizer = create_optimizer(create_group_params(net.trainable_params(), **optim_cfg), **optim_cfg)
    train = cfg.train
    ema = EMA(net, ema_decay=train.get("ema_decay", 0.9999), updates=0) if train.get("ema", False) else None
    accum = train.get("gradient_accumulation_steps", 1)
    step_cell = TrainOneStepWrapper(net_with_loss, optimizer=optimizer, scale_sense=loss_scale_manager,
                                    drop_overflow_update=cfg.system.drop_overflow_update,
                                    gradient_accumulation_steps=accum, clip_grad=train.get("clip_grad", False),
                                    clip_norm=train.get("clip_norm", 1.0), ema=ema)
    step_cell.set_train(True)
    records, window = [], []
    for index, batch in enumerate(batches):
        inputs = [ms.Tensor(batch[key]) for key in ("image", *LOSS_COLUMNS)]
        window.append(mindspore_terms(net, loss_fn, inputs))
        lr_index = int(optimizer.global_step.asnumpy().reshape(-1)[0])  # the LR an update in this call takes
        loss, _, _ = step_cell(*inputs)
        window[-1]["step_loss"] = float(loss.asnumpy())
        if (index + 1) % accum == 0:
            record = {"terms": window, "lr": float(lrs[lr_index]), "state": spill(mindspore_state(net), folder)}
            if ema is not None:
                record["ema"] = spill(ema_state(ema), folder)
            records.append(record)
            window = []
    return records


def mindspore_terms(net: nn.Cell, loss_fn, inputs: list) -> dict[str, float]:
    """DBLoss's three terms at the current weights; BN statistics put back (this forward is an extra one)."""
    saved = {p.name: p.asnumpy().copy() for p in net.get_parameters() if "moving_" in p.name}
    net.set_train(True)
    binary, thresh, thresh_binary = net(inputs[0])
    gt, gt_mask, thresh_map, thresh_mask = inputs[1:]
    prob = float(loss_fn.bce_loss(binary, gt, gt_mask).asnumpy())
    l1 = float(loss_fn.l1_loss(thresh, thresh_map, thresh_mask).asnumpy())
    dice = float(loss_fn.dice_loss(thresh_binary, gt, gt_mask).asnumpy())
    for p in net.get_parameters():
        if p.name in saved:
            p.set_data(ms.Tensor(saved[p.name]))
    return {"loss": dice + loss_fn.l1_scale * l1 + loss_fn.bce_scale * prob, "loss_prob": prob, "loss_thresh": l1,
            "loss_binary": dice}


def run_textdet(cfg, ckpt: str, batches: list[dict], steps_per_epoch: int, dtype: torch.dtype,
                folder: str) -> list[dict]:
    """textdet's Trainer (train_step / optimizer_step) from the same YAML, weights from MindSpore's file;
    ``dtype`` float64: the exact reference both frameworks' fp32 runs are measured against."""
    trainer = build_trainer(cfg, device="cpu", progress=False)
    load_weights(trainer.model, ckpt, "parity")
    trainer.model.to(dtype)  # parameters converted in place: the optimizer keeps them; buffers are new tensors
    if trainer.ema is not None:  # built from the initial weights: rebuild it from the checkpoint's
        trainer.ema = ModelEMA(trainer.model, cfg.train.ema_decay)
    trainer.buffers = [b for b in trainer.model.buffers() if b.is_floating_point()]
    trainer.good_buffers = [b.clone() for b in trainer.buffers]
    trainer.schedule.steps_per_epoch = steps_per_epoch  # as MindOCR's loader length (the user's data size)
    records, window = [], []
    for index, arrays in enumerate(batches):
        batch = {key: torch.from_numpy(value).to(dtype) for key, value in arrays.items()}
        last_micro = (index + 1) % trainer.accum == 0
        losses, _ = trainer.train_step(batch, sync=last_micro)
        window.append({key: float(losses[key]) for key in TERMS})
        if last_micro:
            lr = trainer.schedule(trainer.global_step)
            trainer.optimizer_step()
            state = {k: v.detach().double().clone().numpy() for k, v in trainer.model.state_dict().items()
                     if not k.endswith("num_batches_tracked")}  # clone: a float64 model's .double() is itself
            record = {"terms": window, "lr": lr, "state": spill(state, folder)}
            if trainer.ema is not None:
                ema_state_dict = trainer.ema.module.state_dict()
                record["ema"] = spill({k: v.detach().double().clone().numpy() for k, v in ema_state_dict.items()
                                       if not k.endswith("num_batches_tracked")}, folder)
            records.append(record)
            window = []
    return records


def weight_diffs(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> tuple[float, float]:
    """(max |diff| over the trainable weights, max |diff| / max |value| over each BN statistic tensor)."""
    if set(a) != set(b):
        raise KeyError(f"states differ in names: {sorted(set(a) ^ set(b))[:5]}")
    weights = max(float(np.abs(a[k] - b[k]).max()) for k in a if not is_bn_statistic(k))
    stats = max(float(np.abs(a[k] - b[k]).max() / max(np.abs(a[k]).max(), 1e-12)) for k in a if is_bn_statistic(k))
    return weights, stats


def compare(ms_records: list[dict], td_records: list[dict], verbose: bool, label: str) -> dict:
    """Per update: loss terms' relative differences, LR difference, max |weight diff| (and EMA's)."""
    loss_rel, lr_abs, weight_abs, bn_rel = 0.0, 0.0, 0.0, 0.0
    if verbose:
        print(f"\n{label}: update | loss of the first (prob, thresh, binary) | rel diff of each | lr of the first | "
              "|lr diff| | max |weight diff| | BN statistics max rel diff", flush=True)
    for update, (m, t) in enumerate(zip(ms_records, td_records, strict=True)):
        rels = []
        for m_terms, t_terms in zip(m["terms"], t["terms"], strict=True):
            rels.append([abs(m_terms[k] - t_terms[k]) / max(abs(m_terms[k]), 1e-12) for k in TERMS])
        worst_rel = max(max(r) for r in rels)
        lr_diff = abs(m["lr"] - t["lr"])
        weight, stats = weight_diffs(unspill(m["state"]), unspill(t["state"]))
        if "ema" in m:
            ema_weight, ema_stats = weight_diffs(unspill(m["ema"]), unspill(t["ema"]))
            weight, stats = max(weight, ema_weight), max(stats, ema_stats)
        loss_rel, lr_abs = max(loss_rel, worst_rel), max(lr_abs, lr_diff)
        weight_abs, bn_rel = max(weight_abs, weight), max(bn_rel, stats)
        if verbose:
            first = m["terms"][0]
            terms = ", ".join(f"{first[k]:.5f}" for k in TERMS[1:])
            print(f"  {update + 1:2d} | {first['loss']:.5f} ({terms}) | {' '.join(f'{v:.1e}' for v in rels[0])} | "
                  f"{m['lr']:.3e} | {lr_diff:.1e} | {weight:.2e} | {stats:.1e}", flush=True)
    return {"max_loss_rel": loss_rel, "max_lr_abs": lr_abs, "max_weight_abs": weight_abs, "max_bn_stat_rel": bn_rel}


def pretrain(cfg, steps: int, seed: int) -> dict[str, torch.Tensor]:
    """textdet's model of the config after ``steps`` Adam steps (lr 1e-3) on the user's pipeline (other crops than
    the compared batches): a user's checkpoint is trained, not MindOCR's random init."""
    torch.manual_seed(seed)
    model = build_model_from_config(cfg, pretrained_backbone=False).train()
    loss_fn = build_loss_from_config(cfg)
    dataset = build_dataset(cfg, "train", build_pipeline(cfg, "train"))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(steps):
        if step % 10 == 0:
            print(f"  pretraining: step {step}/{steps}", file=sys.stderr, flush=True)
        batch = collate([dataset[(1 + step // len(dataset), step % len(dataset))]])
        labels = {key: batch[key].float() for key in LOSS_COLUMNS}
        loss = loss_fn(model(batch["image"].float()), **labels)["loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.state_dict()


def synthetic_data(root: str, images: int) -> str:
    """ICDAR2015-layout synthetic images (1280x720), made once with ``textdet synth``."""
    if not os.path.isdir(os.path.join(root, "train")):
        subprocess.run([sys.executable, "-m", "textdet", "synth", root, "--train", str(images), "--val", "2",
                        "--size", "1280x720", "--seed", "0"], check=True, stdout=subprocess.DEVNULL)
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--steps", type=int, default=20, help="optimizer updates per case")
    parser.add_argument("--width", type=int, default=8, help="ResNet-50 stem channels (64: the real network)")
    parser.add_argument("--neck", type=int, default=32, help="DBFPN channels (256: the real network)")
    parser.add_argument("--steps-per-epoch", type=int, default=1012, help="MindOCR's loader length")
    parser.add_argument("--num-epochs", type=int, default=1, help="scheduler.num_epochs (the user's: 1)")
    parser.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "textdet_parity_train_synth"))
    parser.add_argument("--crop", type=int, default=640, help="RandomCropWithBBox size (the user's: 640)")
    parser.add_argument("--no-paper", action="store_true", help="skip the run with textdet's default head")
    parser.add_argument("--pretrain", type=int, default=20,
                        help="textdet Adam steps before the checkpoint is written (0: MindOCR's random init)")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the tables")
    parser.add_argument("--json-file", help="also write that JSON object to this file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads of each framework (torch, MindSpore)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    ms.device_context.cpu.op_tuning.threads_num(args.threads)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_seed(args.seed)
    torch.manual_seed(args.seed)
    data_root = synthetic_data(args.data, 40)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "mindocr.ckpt")
        net = MsDBNet(args.width, args.neck)
        if args.pretrain:
            base = load_config(USER_CONFIG, overrides(args, {}, data_root, os.path.join(tmp, "pretrain"), "paper"))
            load_into_mindspore(net, pretrain(base, args.pretrain, args.seed))
        ms.save_checkpoint(net, ckpt)  # the one checkpoint, written by MindSpore: both sides load this file
        for name in args.cases:
            cfg = load_config(USER_CONFIG, overrides(args, CASES[name], data_root, os.path.join(tmp, name), "mindocr"))
            accum = cfg.train.gradient_accumulation_steps
            batches = make_batches(cfg, args.steps * accum)
            ms_cfg = mindocr_config(CASES[name], args.num_epochs)
            seconds = {"start": time.perf_counter()}
            ms_records = run_mindspore(ms_cfg, ckpt, batches, args.steps_per_epoch, args.width, args.neck, tmp)
            seconds["mindocr"] = time.perf_counter()
            td32 = run_textdet(cfg, ckpt, batches, args.steps_per_epoch, torch.float32, tmp)
            seconds["textdet_fp32"] = time.perf_counter()
            results[name] = compare(ms_records, td32, not args.json, f"{name}: MindOCR vs textdet fp32 "
                                    "(model.head.step: mindocr)")
            td64 = run_textdet(cfg, ckpt, batches, args.steps_per_epoch, torch.float64, tmp)
            seconds["textdet_fp64"] = time.perf_counter()
            floors = {"floor": compare(td32, td64, not args.json, f"{name}: textdet fp32 vs textdet fp64"),
                      "mindocr_vs_fp64": compare(ms_records, td64, False, "")}
            if not args.no_paper:
                paper = load_config(USER_CONFIG, overrides(args, CASES[name], data_root, os.path.join(tmp, "p" + name),
                                                           "paper"))
                paper32 = run_textdet(paper, ckpt, batches, args.steps_per_epoch, torch.float32, tmp)
                floors["head_paper"] = compare(ms_records, paper32, False, "")
                seconds["textdet_paper_fp32"] = time.perf_counter()
            for prefix, values in floors.items():
                results[name].update({f"{prefix}_{key}": value for key, value in values.items()})
            results[name]["wall_s"] = wall_times(seconds)
            print(f"{name}: wall seconds {results[name]['wall_s']}", file=sys.stderr, flush=True)
    if args.json_file:
        with open(args.json_file, "w") as f:
            json.dump(results, f, indent=1)
    if args.json:
        print(json.dumps(results))
    else:
        print_table(results, args)
    worst_ok = all(results[n][f"max_{k}"] < limit for n in results for k, limit in LIMITS.items())
    return 0 if worst_ok else 1


def wall_times(marks: dict[str, float]) -> dict[str, float]:
    """Seconds each side took, from the time marks taken after it (in insertion order)."""
    names = list(marks)
    return {name: round(marks[name] - marks[before], 1) for before, name in zip(names, names[1:], strict=False)}


def print_table(results: dict, args: argparse.Namespace) -> None:
    print(f"\n{args.steps} updates, ResNet-50 layout at width {args.width}, DBFPN {args.neck}, crop {args.crop}; "
          f"steps/epoch {args.steps_per_epoch}, num_epochs {args.num_epochs}. Each cell: max loss rel diff / "
          "max LR abs diff / max weight abs diff / BN statistics max rel diff, over all updates")
    print("| case | MindOCR vs textdet fp32 | textdet fp32 vs fp64 (our floor) | MindOCR fp32 vs textdet fp64 | "
          "MindOCR vs textdet's default head (paper step) |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        cells = []
        for prefix in ("", "floor_", "mindocr_vs_fp64_", "head_paper_"):
            if f"{prefix}max_loss_rel" not in r:
                cells.append("-")
                continue
            keys = ("loss_rel", "lr_abs", "weight_abs", "bn_stat_rel")
            cells.append(" / ".join(f"{r[prefix + 'max_' + key]:.1e}" for key in keys))
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("limits (MindOCR vs textdet fp32): " + ", ".join(f"{k} < {v:g}" for k, v in LIMITS.items()))


if __name__ == "__main__":
    sys.exit(main())
