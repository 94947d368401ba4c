"""Start-up: process start -> first batch entering the model, DBNet-R50 eager on this CPU.

Run: ``python benchmarks/speed/bench_startup.py [--config USER_YAML] [--runs 2] [-o key=value ...]``

Runs the real ``textdet train -c mindocr_db_r50_user.yaml`` in a subprocess on a tiny synthetic
1280x720 data set (ImageNet weights off: no download), waits for the run folder's ``startup.json``
(written right after the first step), reads it and stops the process. Reports
``total_to_first_batch`` (the goal: under 5 s), ``total_to_first_step`` and the stage table, as
measured by the process itself from its own start (/proc). Then the wall time of ``--dry-run`` and
of three bad configs (unknown key, bad backbone name, missing data folder), which should fail in
under 2 s. Medians over ``--runs``. A script, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from textdet.data.synth import generate_dataset

HERE = os.path.dirname(os.path.abspath(__file__))
USER_YAML_CANDIDATES = (
    os.path.join(HERE, "..", "..", "configs", "mindocr_db_r50_user.yaml"),
)
BAD_CONFIGS = {
    "unknown key (train.loader.batch_sise)": ["train.loader.batch_sise=2"],
    "bad backbone name (det_resnet5)": ["model.backbone.name=det_resnet5"],
    "missing data folder": ["train.dataset.dataset_root=/nonexistent/ic15"],
}


def train_cmd(config: str, root: str, run_dir: str, extra: list[str]) -> list[str]:
    opts = [f"train.dataset.dataset_root={root}", f"eval.dataset.dataset_root={root}",
            "model.backbone.pretrained=false", "scheduler.num_epochs=1", f"train.ckpt_save_dir={run_dir}", *extra]
    cmd = [sys.executable, "-m", "textdet", "train", "-c", config, "--no-progress"]
    for o in opts:
        cmd += ["-o", o]
    return cmd


def first_step(cmd: list[str], run_dir: str, timeout: float) -> tuple[dict, float]:
    """Start ``cmd``, wait for ``run_dir/startup.json``, stop the process; (its content, wall seconds)."""
    path = os.path.join(run_dir, "startup.json")
    start = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        while time.time() - start < timeout:
            if os.path.isfile(path):
                try:
                    with open(path) as f:
                        return json.load(f), time.time() - start
                except ValueError:  # being written
                    pass
            if proc.poll() is not None:
                raise RuntimeError(f"textdet train exited ({proc.returncode}) before the first step:\n"
                                   + proc.stderr.read().decode(errors="replace")[-2000:])
            time.sleep(0.02)
        raise RuntimeError(f"no startup.json after {timeout} s")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # the trainer and its loader workers (own session)
        proc.wait()
        proc.stderr.close()


def wall(cmd: list[str]) -> tuple[float, int, str]:
    start = time.time()
    done = subprocess.run(cmd, capture_output=True, text=True)
    return time.time() - start, done.returncode, (done.stderr.strip().splitlines() or [""])[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=next((p for p in USER_YAML_CANDIDATES if os.path.isfile(p)), None))
    parser.add_argument("--runs", type=int, default=2, help="runs of each measurement (median reported)")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("-o", "--opt", action="append", default=[], help="extra overrides for every run")
    args = parser.parse_args()
    if not args.config:
        parser.error("the user's config was not found; pass --config mindocr_db_r50_user.yaml")
    load_before = os.getloadavg()
    tmp = tempfile.mkdtemp(prefix="textdet_startup_")
    root = os.path.join(tmp, "synth")
    generate_dataset(root, n_train=8, n_val=2, seed=0, size=(1280, 720), progress=False)

    results = []
    for r in range(args.runs):
        run_dir = os.path.join(tmp, f"run{r}")
        info, seconds = first_step(train_cmd(args.config, root, run_dir, args.opt), run_dir, args.timeout)
        results.append((info, seconds))
    print(f"textdet train -c {os.path.basename(args.config)} (DBNet-R50, eager, CPU, {os.cpu_count()} cores), "
          f"synthetic 1280x720, {args.runs} run(s); extra overrides: {args.opt or 'none'}")
    for key in ("total_to_first_batch", "total_to_first_step"):
        values = [info[key] for info, _ in results]
        print(f"  {key:<22} median {statistics.median(values):6.2f} s   runs {', '.join(f'{v:.2f}' for v in values)}")
    print(f"  {'startup.json seen':<22} median {statistics.median(s for _, s in results):6.2f} s after launch")
    stages = results[-1][0]["stages"]
    width = max(len(k) for k in stages)
    print("  stages of the last run (seconds):")
    for k, v in stages.items():
        print(f"    {k:<{width}}  {v:6.2f}")

    dry = [wall(train_cmd(args.config, root, os.path.join(tmp, "dry"), args.opt) + ["--dry-run"])
           for _ in range(args.runs)]
    print(f"  --dry-run wall          median {statistics.median(d[0] for d in dry):6.2f} s (exit {dry[-1][1]})")
    for name, bad in BAD_CONFIGS.items():
        runs = [wall(train_cmd(args.config, root, os.path.join(tmp, "bad"), args.opt + bad)) for _ in range(args.runs)]
        secs = statistics.median(d[0] for d in runs)
        print(f"  bad config, {name}: {secs:.2f} s to fail (exit {runs[-1][1]}; goal < 2 s): {runs[-1][2][:160]}")
    print(f"  load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
