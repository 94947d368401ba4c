"""One epoch of the built-in recipe under each amp_level: mean loss, f-score and minutes, interleaved.

Run: ``python benchmarks/speed/bench_precision.py [--levels O0,O2,O3] [--rounds 2] [--epochs 1]``

Each run is a real ``textdet train`` (same seed, same data) with ``system.amp_level`` changed, so
the losses are comparable; rounds alternate the levels (O0, O2, O3, O0, ...) so a machine whose load
changes during the benchmark biases no level. Prints one line per run, then per level: the mean
loss relative to O0 (issue target: within 15% for O2, 25% for O3) and the time ratio to O0. Exits
1 when a level misses its loss target.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TARGET = {"O1": 0.15, "O2": 0.15, "O3": 0.25}  # allowed |loss / loss_O0 - 1|


def one_run(level: str, epochs: int, folder: str) -> dict:
    run_dir = os.path.join(folder, f"{level}-{time.time_ns()}")
    cmd = [sys.executable, "-m", "textdet", "train", "--no-progress", "-o", f"system.amp_level={level}",
           "-o", f"scheduler.num_epochs={epochs}", "-o", f"train.ckpt_save_dir={run_dir}"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    minutes = (time.perf_counter() - t0) / 60
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        records = [json.loads(line) for line in f]
    return {"level": level, "loss": [r["loss"] for r in records], "f-score": records[-1].get("f-score"),
            "train_min": sum(r["epoch_time"] for r in records) / 60, "total_min": minutes}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="O0,O2,O3")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=1)
    args = ap.parse_args()
    levels = args.levels.split(",")
    if levels[0] != "O0":
        levels.insert(0, "O0")
    runs: list[dict] = []
    with tempfile.TemporaryDirectory() as folder:
        for r in range(args.rounds):
            for level in levels:
                res = one_run(level, args.epochs, folder)
                runs.append(res)
                print(f"round {r + 1} {level}: mean loss per epoch {[round(x, 4) for x in res['loss']]}, "
                      f"f-score {res['f-score']}, train {res['train_min']:.2f} min, process {res['total_min']:.2f} min",
                      flush=True)
    base_loss = statistics.mean(x["loss"][-1] for x in runs if x["level"] == "O0")
    base_min = statistics.mean(x["train_min"] for x in runs if x["level"] == "O0")
    ok = True
    summary = {}
    for level in levels:
        mine = [x for x in runs if x["level"] == level]
        loss = statistics.mean(x["loss"][-1] for x in mine)
        rel = loss / base_loss - 1
        within = abs(rel) <= TARGET.get(level, 0.0) or level == "O0"
        ok &= within
        summary[level] = {"loss": round(loss, 4), "loss_vs_O0": round(rel, 4), "target": TARGET.get(level),
                          "within": within, "f-score": [x["f-score"] for x in mine],
                          "train_min": round(statistics.mean(x["train_min"] for x in mine), 2),
                          "time_ratio_vs_O0": round(statistics.mean(x["train_min"] for x in mine) / base_min, 3)}
    print(json.dumps(summary, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
