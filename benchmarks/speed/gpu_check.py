"""Run every accelerator-only path of textdet once and print one JSON object (exit 1 on any failure).

Run: ``python benchmarks/speed/gpu_check.py [--device cuda:0] [--skip-throughput] [--only CHECK,...]``

Paths: pinned-memory prefetch on a side stream, uint8 batches normalised on the device, fp16 with
dynamic loss scaling and an injected overflow, bf16, O3, channels_last, torch.compile cold then warm
(the persistent cache), the device-side bitmap threshold in evaluation (same metric as on the CPU),
DDP at world size 1 with the device's backend (nccl on CUDA), ONNX Runtime's device provider when
installed, the DB targets built on the device (train.targets_on_device: ms per batch, equality with the
CPU's), the compiled training step (graph breaks, recompiles, compiled/eager step time), bucketed batched
evaluation (eval.shape_buckets auto + batch 4 vs one image: f-score, img/s, distinct shapes), bf16 vs fp16
(system.amp_dtype), then DBNet-R50 640x640 training img/s (fp32, fp16, bf16) and the data-wait share with the real
loader on synthetic 1280x720 data. First run on an H200, 2026-12-04: docs/BENCHMARKS.md, "GPU"
(compile_cold_warm and r50_throughput not yet run to the end there).
Without an accelerator it says so and exits 0 at once.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

import torch

import textdet
from textdet import device as dev
from textdet.errors import TextdetError

HERE = os.path.dirname(os.path.abspath(__file__))
RECIPE = os.path.join(os.path.dirname(textdet.__file__), "recipes", "synthetic_dbnet_r18.yaml")
R50 = os.path.join(HERE, "..", "..", "configs", "db_r50_icdar15.yaml")
TINY = {"model.backbone.width": 8, "model.neck.out_channels": 32, "train.loader.batch_size": 4,
        "train.loader.num_workers": 2, "eval.loader.batch_size": 2, "eval.loader.num_workers": 1,
        "scheduler.num_epochs": 1, "scheduler.warmup_epochs": 0, "system.log_interval": 4}


def overrides(root: str, run_dir: str, **extra) -> list[str]:
    opts = {**TINY, "train.dataset.dataset_root": root, "eval.dataset.dataset_root": root,
            "train.ckpt_save_dir": run_dir, "eval.ckpt_load_path": os.path.join(run_dir, "best.ckpt"), **extra}
    return [f"{k}={v}" for k, v in opts.items()]


def textdet_cli(*args: str, timeout: int = 300, launcher: tuple[str, ...] = ("-m", "textdet")) -> str:
    out = subprocess.run([sys.executable, *launcher, *args], capture_output=True, text=True, timeout=timeout)
    if out.returncode:
        raise RuntimeError(f"{' '.join(args[:2])} exited {out.returncode}: {out.stderr[-1500:]}")
    return out.stdout


def trainer(root: str, run_dir: str, device: str, **extra):
    from textdet.build.training import build_trainer
    from textdet.config import load_config

    return build_trainer(load_config(RECIPE, overrides(root, run_dir, **extra)), device=device, compile="off",
                         progress=False)


# ------------------------------------------------------------------------------------------ the checks
def check_prefetch_and_device_normalise(ctx: dict) -> dict:
    """Side-stream prefetch of pinned uint8 batches, normalised on the device == normalised on the CPU."""
    from textdet.runtime.feed import DeviceInput, Prefetcher

    t = trainer(ctx["root"], ctx["tmp"] + "/prefetch", ctx["device"])
    assert t.normalize is not None, "the pipeline's normalisation was not moved to the device"
    assert t.train_loader.pin_memory, "the loader does not pin memory"
    raw = next(iter(t.train_loader))
    batches = Prefetcher([raw], t.feed)
    assert batches.stream is not None, "no side stream"
    first = next(iter(batches))
    on_cpu = DeviceInput(torch.device("cpu"), t.normalize)(raw)["image"]
    diff = float((first["image"].cpu() - on_cpu).abs().max())
    assert raw["image"].dtype == torch.uint8 and diff < 1e-4, f"device vs CPU normalisation differ by {diff}"
    return {"max_abs_diff": diff}


def _steps(t, n: int = 3) -> list[float]:
    from textdet.runtime.feed import Prefetcher

    losses = []
    for i, batch in enumerate(Prefetcher(t.train_loader, t.feed)):
        if i == n:
            break
        losses.append(float(t.train_step(batch, sync=True)[0]["loss"]))
        t.optimizer_step()
    assert all(x == x and abs(x) < 1e4 for x in losses), f"losses {losses}"
    return losses


def check_fp16_loss_scaling_overflow(ctx: dict) -> dict:
    t = trainer(ctx["root"], ctx["tmp"] + "/fp16", ctx["device"], **{"system.amp_level": "O2",
                "system.amp_dtype": "fp16", "loss_scaler.type": "dynamic", "loss_scaler.loss_scale": 1024})
    assert t.amp.dtype == torch.float16 and t.scaler.enabled
    losses = _steps(t, 2)
    batch = next(iter(t.train_loader))
    t.train_step(t.feed(batch), sync=True)
    t.params[0].grad.fill_(float("inf"))  # the injected overflow
    before = [p.detach().clone() for p in t.params[:5]]
    scale = t.scaler.scale
    assert t.optimizer_step() is True, "the overflow step was not detected"
    assert t.scaler.scale == scale / 2, f"scale {scale} -> {t.scaler.scale}, expected halved"
    assert all(torch.equal(a, p) for a, p in zip(before, t.params[:5], strict=True)), "overflow step changed weights"
    return {"losses": losses, "scale_after_overflow": t.scaler.scale}


def check_bf16(ctx: dict) -> dict:
    t = trainer(ctx["root"], ctx["tmp"] + "/bf16", ctx["device"], **{"system.amp_level": "O2",
                "system.amp_dtype": "bf16"})
    assert t.amp.dtype == torch.bfloat16 and not t.scaler.enabled, "bf16 autocast must run without loss scaling"
    return {"losses": _steps(t)}


def _step_seconds(t, n: int) -> list[float]:
    """Seconds of each of ``n`` full training steps (synchronised), and that every loss is finite."""
    from textdet.runtime.feed import Prefetcher

    device = torch.device(t.device)
    times = []
    for i, batch in enumerate(Prefetcher(t.train_loader, t.feed)):
        if i == n:
            break
        dev.synchronize(device)
        start = time.perf_counter()
        loss = t.train_step(batch, sync=True)[0]["loss"]
        t.optimizer_step()
        dev.synchronize(device)
        times.append(time.perf_counter() - start)
        assert torch.isfinite(loss).item(), f"step {i}: loss {loss}"
    return times


def check_compiled_step(ctx: dict) -> dict:
    """system.mode 0's step: forward + DB loss in one ``fullgraph=True`` graph (engine/step.py) over 6 steps of a
    fixed batch shape: frames compiled (1 = no recompile), graph breaks, recompiles, compiled/eager step time."""
    from torch._dynamo.testing import CompileCounterWithBackend
    from torch._dynamo.utils import counters

    from textdet.engine.step import compile_step

    t = trainer(ctx["root"], ctx["tmp"] + "/compiled", ctx["device"], **{"train.loader.drop_remainder": True})
    eager = _step_seconds(t, 6)[1:]  # the first step warms the kernels
    torch._dynamo.reset()
    counters.clear()
    counter = CompileCounterWithBackend(ctx.get("compile_backend", "inductor"))
    t.loss_step, t.compiled = compile_step(t.loss_step, backend=counter), True
    compiled = _step_seconds(t, 6)
    eager_ms, compiled_ms = 1000 * sorted(eager)[2], 1000 * sorted(compiled[1:])[2]
    result = {"frames": counter.frame_count, "graph_breaks": sum(counters["graph_break"].values()),
              "recompiles": counter.frame_count - 1, "eager_step_ms": round(eager_ms, 2),
              "compiled_step_ms": round(compiled_ms, 2), "compiled_over_eager": round(compiled_ms / eager_ms, 3),
              "first_compiled_step_s": round(compiled[0], 1)}
    assert result["graph_breaks"] == 0 and counter.frame_count <= 2, f"graph breaks or recompiles: {result}"
    return result


def _mixed_size_set(tmp: str) -> str:
    """8 synthetic images of two sizes (4 of 256x192, 4 of 448x336) in one folder, labelled in mixed_gt.txt."""
    from textdet.data.synth import generate_dataset

    source, root = os.path.join(tmp, "mixed_source"), os.path.join(tmp, "mixed")
    generate_dataset(source, n_train=0, n_val=4, seed=1, size=(256, 192), n_heldout=4, progress=False)
    os.makedirs(os.path.join(root, "images"), exist_ok=True)
    lines = []
    for split, label_file in (("val", "test_gt.txt"), ("heldout", "heldout_gt.txt")):
        with open(os.path.join(source, label_file), encoding="utf-8") as f:
            for line in f:
                name, annotations = line.split("\t", 1)
                target = os.path.join(root, "images", f"{split}_{name}")
                shutil.copy(os.path.join(source, split, "images", name), target)
                lines.append(f"{split}_{name}\t{annotations}")
    with open(os.path.join(root, "mixed_gt.txt"), "w", encoding="utf-8") as f:
        f.writelines(lines)
    return root


def check_bucketed_eval(ctx: dict) -> dict:
    """eval.shape_buckets auto + batch 4 against one image at a time, same (random) weights, on images of two sizes
    at their own size (DetResize limit_type none): f-score difference, img/s of each, distinct input shapes."""
    from textdet.build.parts import evaluate_checkpoint
    from textdet.config import load_config

    run = os.path.join(ctx["tmp"], "bucketrun")
    os.makedirs(run, exist_ok=True)
    ckpt = os.path.join(run, "random.ckpt")
    torch.manual_seed(0)
    t = trainer(ctx["root"], run, "cpu")
    torch.save({"model": t.model.state_dict()}, ckpt)
    resize = "eval.dataset.transform_pipeline.DetResize"
    mixed = {"eval.dataset.dataset_root": _mixed_size_set(ctx["tmp"]), "eval.dataset.data_dir": "images",
             "eval.dataset.label_file": "mixed_gt.txt", f"{resize}.target_size": "null", f"{resize}.limit_type": "none"}
    plain = evaluate_checkpoint(load_config(RECIPE, overrides(ctx["root"], run, **mixed, **{
        "eval.loader.batch_size": 1})), ckpt=ckpt, device=ctx["device"])
    bucketed = evaluate_checkpoint(load_config(RECIPE, overrides(ctx["root"], run, **mixed, **{
        "eval.loader.batch_size": 4, "eval.shape_buckets": "auto"})), ckpt=ckpt, device=ctx["device"])
    result = {"f_score_plain": plain["f-score"], "f_score_bucketed": bucketed["f-score"],
              "input_shapes_plain": plain["input_shapes"], "input_shapes_bucketed": bucketed["input_shapes"],
              "img_per_s_plain": round(plain["img_per_s"], 2), "img_per_s_bucketed": round(bucketed["img_per_s"], 2)}
    assert abs(plain["f-score"] - bucketed["f-score"]) <= 0.002, f"f-scores differ: {result}"
    assert bucketed["input_shapes"] <= 6, f"too many shapes: {result}"
    return result


def check_bf16_vs_fp16(ctx: dict) -> dict:
    """system.amp_dtype: 4 steps each; bf16 (where the device has it) without loss scaling, fp16 with it."""
    result = {"device_default": str(dev.half_dtype(torch.device(ctx["device"]).type)).replace("torch.", "")}
    for name in ("bf16", "fp16"):
        if name == "bf16" and not dev.supports_bf16(torch.device(ctx["device"]).type):
            result[name] = {"skipped": "no bf16 on this device"}
            continue
        t = trainer(ctx["root"], ctx["tmp"] + "/" + name, ctx["device"], **{"system.amp_level": "O2",
                    "system.amp_dtype": name, "loss_scaler.type": "dynamic", "loss_scaler.loss_scale": 1024})
        assert t.scaler.enabled == (name == "fp16"), f"{name}: loss scaling {t.scaler.enabled}"
        seconds = _step_seconds(t, 4)
        result[name] = {"step_ms": round(1000 * sorted(seconds[1:])[1], 2), "loss_scaling": t.scaler.enabled}
    return result


def check_o3_and_channels_last(ctx: dict) -> dict:
    t = trainer(ctx["root"], ctx["tmp"] + "/o3", ctx["device"], **{"system.amp_level": "O3"})
    assert all(p.dtype == torch.float32 for p in t.params), "O3 must keep fp32 master weights"
    conv = next(m for m in t.model.modules() if isinstance(m, torch.nn.Conv2d) and m.kernel_size[0] > 1)
    assert conv.weight.is_contiguous(memory_format=torch.channels_last), "model not channels_last"
    return {"losses": _steps(t)}


def check_compile_cold_warm(ctx: dict) -> dict:
    """Two fresh processes: the second reuses the persistent compile cache."""
    env_home = os.environ.setdefault("TEXTDET_HOME", os.path.join(ctx["tmp"], "home"))
    result = {"cache": os.path.join(env_home, "compile_cache")}
    for phase in ("cold", "warm"):
        run = os.path.join(ctx["tmp"], f"compile-{phase}")
        opts = [x for o in overrides(ctx["root"], run, **{"system.val_while_train": False}) for x in ("-o", o)]
        textdet_cli("train", "-c", RECIPE, *opts, "--compile", "on", "--device", ctx["device"], "--no-progress",
                    timeout=600)
        result[f"{phase}_compile_s"] = json.load(open(os.path.join(run, "startup.json"))).get("compile_estimated")
    return result


def check_eval_device_bitmap(ctx: dict) -> dict:
    """The bitmap thresholded on the device gives the metric of a CPU evaluation of the same weights."""
    from textdet.build.parts import evaluate_checkpoint
    from textdet.config import load_config

    run = os.path.join(ctx["tmp"], "evalrun")
    t = trainer(ctx["root"], run, ctx["device"], **{"scheduler.num_epochs": 2})
    t.fit()
    cfg = load_config(RECIPE, overrides(ctx["root"], run))
    on_dev = evaluate_checkpoint(cfg, device=ctx["device"])
    on_cpu = evaluate_checkpoint(cfg, device="cpu")
    keys = ("recall", "precision", "f-score")
    assert all(abs(on_dev[k] - on_cpu[k]) < 1e-6 for k in keys), f"device {on_dev} vs cpu {on_cpu}"
    return {k: on_dev[k] for k in keys}


def check_ddp_world_1(ctx: dict) -> dict:
    run = os.path.join(ctx["tmp"], "ddp")
    opts = [x for o in overrides(ctx["root"], run, **{"system.distribute": True}) for x in ("-o", o)]
    textdet_cli("--nproc_per_node=1", "-m", "textdet", "train", "-c", RECIPE, *opts, "--no-progress",
                launcher=("-m", "torch.distributed.run"))
    log = open(os.path.join(run, "train.log")).read()
    return {"backend": dev.dist_backend(torch.device(ctx["device"]).type), "trained": "epoch: [1/1]" in log}


def check_onnxruntime_provider(ctx: dict) -> dict:
    try:
        import onnxruntime as ort
    except ImportError:
        return {"skipped": "onnxruntime not installed"}
    kind = torch.device(ctx["device"]).type
    try:
        provider = dev.ort_providers(kind, ort.get_available_providers())[0]
    except TextdetError as e:  # the CPU-only onnxruntime wheel: nothing of ours to check on the device
        return {"skipped": str(e)}
    run = os.path.join(ctx["tmp"], "evalrun")
    onnx_path = os.path.join(ctx["tmp"], "tiny.onnx")
    opts = [x for o in overrides(ctx["root"], run) for x in ("-o", o)]
    textdet_cli("export", "-c", RECIPE, *opts, "--ckpt", os.path.join(run, "best.ckpt"), "--out", onnx_path)
    out = textdet_cli("eval", "-c", RECIPE, *opts, "--onnx", onnx_path, "--device", ctx["device"], "--json")
    return {"provider": provider, "eval": json.loads(out.strip().splitlines()[-1])}


def check_targets_on_device(ctx: dict) -> dict:
    """train.targets_on_device: DeviceTargets on a batch of 8 640x640 crops (word quads, then 14-point curves) timed
    on the device against ShrinkBinaryMap + BorderMap on the CPU, and its maps compared with theirs."""
    import numpy as np
    from bench_targets import SIZE, random_curves, random_quads

    from textdet.data.device_targets import COLUMNS, DeviceTargets, PackPolygons
    from textdet.data.targets import BorderMap, ShrinkBinaryMap

    device, rng = torch.device(ctx["device"]), np.random.default_rng(0)
    shrink, border, targets = ShrinkBinaryMap(), BorderMap(), DeviceTargets()
    result = {}
    for name, make in (("quads", random_quads), ("curves", random_curves)):
        samples = [{"image": np.zeros((SIZE, SIZE, 3), np.uint8), "polys": make(rng),
                    "ignore_tags": np.zeros(0, bool)} for _ in range(8)]
        for s in samples:
            s["ignore_tags"] = rng.random(len(s["polys"])) < 0.1
        t0 = time.perf_counter()
        cpu = [border(shrink(dict(s))) for s in samples]
        cpu_ms = 1000 * (time.perf_counter() - t0)
        t0 = time.perf_counter()
        packed = [PackPolygons(shrink, border)(dict(s)) for s in samples]
        pack_ms = 1000 * (time.perf_counter() - t0)
        batch = {c: torch.from_numpy(np.stack([p[c] for p in packed])) for c in COLUMNS}
        times = []
        for _ in range(6):
            dev.synchronize(device)
            t0 = time.perf_counter()
            maps = targets(batch, (SIZE, SIZE), device)
            dev.synchronize(device)
            times.append(1000 * (time.perf_counter() - t0))
        ref = {k: torch.from_numpy(np.stack([c[k] for c in cpu])).float() for k in maps}
        got = {k: v.cpu().reshape(ref[k].shape) for k, v in maps.items()}
        iou = {k: float(((ref[k] > 0) & (got[k] > 0)).sum() / ((ref[k] > 0) | (got[k] > 0)).sum().clamp_min(1))
               for k in ("binary_map", "thresh_mask")}
        iou["mask"] = float(((ref["mask"] == 0) & (got["mask"] == 0)).sum() / ((ref["mask"] == 0) | (got["mask"] == 0))
                            .sum().clamp_min(1))
        thresh = float((ref["thresh_map"] - got["thresh_map"]).abs().mean())
        assert min(iou.values()) >= 0.98 and thresh < 0.005, f"{name}: IoU {iou}, thresh map mean |diff| {thresh}"
        result[name] = {"cpu_targets_ms_per_batch": cpu_ms, "worker_pack_ms_per_batch": pack_ms,
                        "device_ms_per_batch": sorted(times[1:])[len(times[1:]) // 2], "iou": iou,
                        "thresh_mean_abs_diff": thresh}
    return result


def check_r50_throughput(ctx: dict) -> dict:
    """DBNet-R50, batch 8 of 640x640: training img/s per precision, and the data-wait share of the real loader."""
    from textdet.build import parts, training
    from textdet.config import load_config

    cfg = load_config(R50, ["model.backbone.pretrained=false"])
    device = torch.device(ctx["device"])
    model = parts.build_model_from_config(cfg, pretrained_backbone=False).to(device).train()
    model.to(memory_format=torch.channels_last)
    loss_fn = training.build_loss_from_config(cfg).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    x = torch.randn(8, 3, 640, 640, device=device).contiguous(memory_format=torch.channels_last)
    gt = {"binary_map": (torch.rand(8, 1, 640, 640, device=device) > 0.8).float(),
          "mask": torch.ones(8, 640, 640, device=device), "thresh_map": torch.rand(8, 640, 640, device=device),
          "thresh_mask": torch.ones(8, 640, 640, device=device)}
    result = {}
    for name, dtype in (("fp32", None), ("fp16", torch.float16), ("bf16", torch.bfloat16)):
        scaler = torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)
        for i in range(25):
            if i == 5:
                dev.synchronize(device)
                t0 = time.perf_counter()
            with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
                preds = model(x)
            scaler.scale(loss_fn(preds, **gt)["loss"]).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
        dev.synchronize(device)
        result[f"train_img_per_s_{name}"] = round(8 * 20 / (time.perf_counter() - t0), 1)
    result["peak_memory_gib"] = round(dev.max_memory_gib(device) or 0, 2)
    synth = os.path.join(ctx["tmp"], "synth720")
    textdet_cli("synth", synth, "--train", "64", "--val", "4", "--size", "1280x720")
    out = textdet_cli("bench", "train", "-c", R50, "-o", f"train.dataset.dataset_root={synth}",
                      "-o", "train.dataset.label_file=train_gt.txt",
                      "-o", f"eval.dataset.dataset_root={synth}",
                      "-o", "eval.dataset.data_dir=val/images", "-o", "eval.dataset.label_file=test_gt.txt",
                      "-o", "model.backbone.pretrained=false",
                      "--n", "20", "--device", ctx["device"], "--json")
    bench = json.loads(out.strip().splitlines()[-1])
    result.update(loader_img_per_s=bench.get("img_per_s"), data_wait_share=bench.get("data_wait_share"))
    return result


CHECKS = {
    "prefetch_side_stream_uint8_normalise": check_prefetch_and_device_normalise,
    "fp16_dynamic_loss_scaling_overflow": check_fp16_loss_scaling_overflow,
    "bf16": check_bf16,
    "o3_channels_last": check_o3_and_channels_last,
    "compile_cold_warm": check_compile_cold_warm,
    "eval_device_bitmap": check_eval_device_bitmap,
    "ddp_world_size_1": check_ddp_world_1,
    "onnxruntime_provider": check_onnxruntime_provider,
    "targets_on_device": check_targets_on_device,
    "compiled_step": check_compiled_step,
    "bucketed_eval": check_bucketed_eval,
    "bf16_vs_fp16": check_bf16_vs_fp16,
    "r50_throughput": check_r50_throughput,
}


def make_context(device: str, tmp: str) -> dict:
    from textdet.data.synth import generate_dataset

    root = os.path.join(tmp, "synth")
    generate_dataset(root, n_train=16, n_val=4, seed=0, size=(256, 192), n_heldout=4, progress=False)  # eval: heldout/
    return {"device": device, "tmp": tmp, "root": root}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", help="the accelerator to check (default: the one torch sees)")
    ap.add_argument("--skip-throughput", action="store_true", help="leave out the R50 img/s figures")
    ap.add_argument("--only", help=f"comma-separated checks to run (default: all): {', '.join(CHECKS)}")
    args = ap.parse_args()
    chosen = list(CHECKS) if args.only is None else list(dict.fromkeys(args.only.split(",")))  # once each
    unknown = [name for name in chosen if name not in CHECKS]
    if unknown:
        ap.error(f"--only: unknown check(s) {unknown}; known: {', '.join(CHECKS)}")
    if args.skip_throughput and chosen == ["r50_throughput"]:
        ap.error("--only r50_throughput with --skip-throughput leaves nothing to run")
    kind = dev.accelerator()
    if kind is None and not args.device:
        print(json.dumps({"accelerator": None, "skipped": "no accelerator visible to torch "
                          f"{torch.__version__}: nothing to check on this machine", "failed": []}))
        return 0
    device = str(dev.pick_device(args.device))
    report: dict = {"accelerator": device, "torch": torch.__version__, "checks": {}, "failed": []}
    with tempfile.TemporaryDirectory() as tmp:
        ctx = make_context(device, tmp)
        for name in chosen:
            if args.skip_throughput and name == "r50_throughput":
                continue
            check = CHECKS[name]
            t0 = time.perf_counter()
            try:
                result = {"ok": True, **check(ctx)}
            except Exception as e:  # every path is reported, the run goes on
                result = {"ok": False, "error": f"{type(e).__name__}: {e}", "where": traceback.format_exc()[-800:]}
                report["failed"].append(name)
            result["seconds"] = round(time.perf_counter() - t0, 1)
            report["checks"][name] = result
            if not result["ok"]:
                status = "FAILED"
            elif "skipped" in result:
                status = "skipped"
            else:
                status = "ok"
            # each result as it comes, so that a run cut short still tells what it found
            line = f"{name}: {status} ({result['seconds']} s) {json.dumps(result, default=str)}"
            print(line, file=sys.stderr, flush=True)
    print(json.dumps(report, indent=1, default=str))
    return 1 if report["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
