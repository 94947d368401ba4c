"""Output and timing shared by the parts of ``bench_vs_mindocr.py`` (textdet vs MindOCR in one process).

Every part logs its progress through ``log`` (stdout, or stderr when ``--json`` keeps stdout for the JSON
object) and times its sides with ``interleaved``, which calls each side once per round and alternates the
order every round, so that a change of load on a shared machine hits every side alike. The clock is
``time.perf_counter`` unless ``--clock cpu`` asks for this process's CPU time (``set_clock``): both sides are
single-threaded on one pinned core, so CPU time leaves out the time other sessions hold that core.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, TextIO

OUT: TextIO = sys.stdout  # where the text goes: stdout, or stderr with --json
CLOCK: Callable[[], float] = time.perf_counter  # --clock cpu: time.process_time


def set_output(stream: TextIO) -> None:
    """Send the text that ``log`` writes to ``stream`` from now on."""
    global OUT
    OUT = stream


def set_clock(kind: str) -> None:
    """Time the sides by wall time (``"wall"``) or by this process's CPU time (``"cpu"``)."""
    global CLOCK
    CLOCK = time.process_time if kind == "cpu" else time.perf_counter


def log(*args: Any) -> None:
    """Print one line of the human-readable report."""
    print(*args, file=OUT, flush=True)


def loadavg() -> list[float]:
    """The machine's 1, 5 and 15 minute load averages (empty where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def fail(part: str, err: BaseException) -> dict:
    """Log why ``part`` failed (with the last lines of its traceback); the ``{"error": ...}`` entry for it."""
    log(f"!! part {part} FAILED: {type(err).__name__}: {err}")
    last_frames = traceback.format_exception(type(err), err, err.__traceback__)[-3:]
    log("   " + "".join(last_frames).replace("\n", "\n   "))
    return {"error": f"{type(err).__name__}: {err}"}


def summarize(values: list[float]) -> dict:
    """Median, min, max and count of a list of per-round figures."""
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "rounds": len(values),
    }


def interleaved(funcs: dict[str, Any], rounds: int) -> dict[str, list[float]]:
    """Call each func once per round (alternating the order each round); seconds per call, per func. A func that
    returns a float has timed itself (the seconds it returns), leaving its untimed set-up out."""
    names = list(funcs)
    out: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        for n in order:
            t0 = CLOCK()
            own = funcs[n]()
            out[n].append(own if isinstance(own, float) else CLOCK() - t0)
    return out


def fresh_map_seconds(pp: Any, pairs: list[tuple]) -> float:
    """Seconds ``pp`` takes over ``pairs`` when each map is copied into a new array just before its call (not
    timed), as an evaluation loop hands it over straight from the model's output copy: warm in the caches."""
    total = 0.0
    for maps, shape in pairs:
        maps = maps.copy()
        t0 = CLOCK()
        pp(maps, shape)
        total += CLOCK() - t0
    return total


def best_ms(fn: Callable[[], Any], reps: int = 30) -> float:
    """Median ms of ``reps`` calls (after one warm-up call), by wall time whatever ``--clock`` says."""
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return 1000.0 * statistics.median(ts)
