"""What the user reads: MindOCR's start banner and the input-bound / compute-bound verdict."""

from __future__ import annotations

import os

from textdet.config import Config


def banner(t) -> str:
    """MindOCR's start-of-training summary, with the same field names; ``t``: a built ``engine.trainer.Trainer``."""
    cfg = t.cfg
    devices = t.dist.world_size
    bs = t.train_loader.batch_size
    sc = cfg.scheduler
    model_name = cfg.model.name or t.model.__class__.__name__
    backbone = (cfg.model.backbone or {}).get("name", "")
    rows = [
        ("Distribute", cfg.system.distribute),
        ("Model", f"{model_name} ({backbone}-{(cfg.model.neck or {}).get('name', '')}-"
                  f"{(cfg.model.head or {}).get('name', '')})"),
        ("Total number of parameters", t.n_params_total),
        ("Total number of trainable parameters", t.n_params),
        ("Data root", cfg.train.dataset.dataset_root),
        ("Train samples", len(t.train_set)),
        ("Eval samples", len(t.eval_set) if t.eval_set is not None else "no evaluation (val_while_train False)"),
        ("Optimizer", cfg.optimizer.opt),
        ("Batch size", bs),
        ("Device", f"{t.device} x {devices}"),
        ("Gradient accumulation steps", t.accum),
        ("Global batch size", f"{bs} x {devices} x {t.accum} = {bs * devices * t.accum}"),
        ("LR", sc.lr),
        ("Scheduler", f"{sc.scheduler} (warmup {sc.warmup_epochs:g} epochs)"),
        ("Steps per epoch", t.steps_per_epoch),
        ("Num epochs", sc.num_epochs),
        ("Clip gradient", f"{cfg.train.clip_grad} (max norm {cfg.train.clip_norm})" if cfg.train.clip_grad else False),
        ("EMA", f"True (decay {cfg.train.ema_decay})" if cfg.train.ema else False),
        ("AMP level", t.amp.describe()),
        ("Loss scaler", f"{cfg.loss_scaler.type}, scale {t.scaler.scale:g}" if t.scaler.enabled
         else f"off ({cfg.loss_scaler.type} in the config; scaling only matters for fp16)"),
        ("Compiled", t.compiled),
        ("Normalisation", "on the device (workers ship uint8)" if t.normalize is not None
         else "in the loader workers (one fused OpenCV call)"),
        ("Workers", t.train_loader.num_workers),
        ("Run folder", os.path.abspath(t.run_dir)),
    ]
    line = "=" * 80
    body = "\n".join(f"{k}: {v}" for k, v in rows)  # MindOCR's "Key: value" lines, greppable alike
    return f"\n{line}\n{body}\n{line}\n{'Start training... (The first epoch takes longer, please wait...)'}"


def throughput_verdict(summary: dict, cfg: Config, batch_size: int) -> str:
    """Input-bound or compute-bound, with the figures behind it and what to change."""
    elapsed, wait = summary["time"], summary["data_wait_s"]
    images = summary["img_per_s"] * elapsed
    share = summary["data_wait_share"]
    model_rate = images / max(elapsed - wait, 1e-9)
    loader_rate = summary["img_per_s"]
    workers = cfg.train.loader.num_workers
    cores = os.cpu_count() or 1
    if share > 0.10:
        if workers == 0:  # loading ran in this process: its rate is images / seconds spent loading
            per_worker = images / max(wait, 1e-9)
        else:
            per_worker = loader_rate / workers
        more = max(min(cores, workers * 2 if workers else cores), 1)
        expect = min(per_worker * more, model_rate)
        return (f"verdict: INPUT-BOUND — the step waited for data {100 * share:.0f}% of the time. The loader gives "
                f"{loader_rate:.1f} img/s, the model could take {model_rate:.1f} img/s. With {workers} worker(s) on "
                f"{cores} core(s) (~{per_worker:.1f} img/s per loading process) expect up to ~{expect:.1f} img/s at "
                f"num_workers={more}. Options: -o train.loader.num_workers={more}, a smaller crop_size, fewer "
                f"RandomScale upscales, or `textdet bench data -c CFG` to see which transform costs most.")
    return (f"verdict: COMPUTE-BOUND — data wait is {100 * share:.0f}% of the step; the model runs at "
            f"{model_rate:.1f} img/s (batch {batch_size}). To go faster: amp_level O1/O2 on a GPU "
            "(-o system.amp_level=O2), compiled mode on CUDA (system.mode 0), a larger batch, or more devices "
            "(torchrun).")
