"""The hang watchdog: a thread in every process that stops a run which no longer makes progress, saying why.
When no step finishes within ``train.step_timeout``, every process prints its Python stack and what it waits on,
and the run stops naming the rank(s) behind the others. When a rank fails, the others stop within seconds with a
summary naming it and its last log lines, instead of waiting for a backend timeout. Under torchrun the ranks
share state through the launcher's key-value store (not through collectives, which are what hangs)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
import traceback
from collections import deque
from datetime import timedelta
from statistics import median

import torch.distributed as dist

from textdet.watch.phases import PHASES, WAITS_ON

logger = logging.getLogger("textdet")

DEFAULT_TIMEOUT_S = 600.0  # before the median step is known, and for evaluation and checkpoints
AUTO_FACTOR, AUTO_FLOOR_S, AUTO_AFTER_STEPS = 20, 60.0, 20
EXIT_HANG, EXIT_PEER_FAILED = 3, 4
LOG_TAIL = 5
STORE_TIMEOUT_S = 10  # each call of the watchdog's store client gives up after this


class TailHandler(logging.Handler):
    """Keeps the last log lines of this process (ranks other than 0 print nothing, yet their lines matter)."""

    def __init__(self, size: int = LOG_TAIL):
        super().__init__(logging.INFO)
        self.lines: deque[str] = deque(maxlen=size)
        self.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s - %(message)s", "%H:%M:%S"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record)[:300])


class Watchdog:
    """``beat()`` after each step; ``between_steps(True)`` around evaluation and checkpoints (their own, longer
    allowance); ``report_failure(err)`` when this process fails. ``timeout``: seconds or "auto"."""

    def __init__(self, timeout: float | str, rank: int, world_size: int, phases, poll_s: float = 1.0,
                 dead_after_s: float = 15.0):
        self.fixed_timeout = None if timeout == "auto" else float(timeout)
        self.rank = rank
        self.world_size = world_size
        self.phases = phases
        self.poll_s = poll_s
        self.dead_after_s = dead_after_s
        self.steps = 0
        self.step_times = deque(maxlen=101)
        self.last_progress = time.monotonic()
        self.in_between = False
        self.tail = TailHandler()
        logger.addHandler(self.tail)
        self.store = connect_store(world_size)
        self.seen: dict[int, tuple[int, float]] = {}  # rank -> (its beat counter, my clock when it changed)
        self.beats = 0
        self.stopped = threading.Event()
        self.main_thread = threading.main_thread()
        self.thread = threading.Thread(target=self._run, name="textdet-watchdog", daemon=True)
        self.thread.start()

    # ------------------------------------------------------------------------------ called by the training loop
    def beat(self, steps: int, step_seconds: float | None) -> None:
        now = time.monotonic()
        self.step_times.append(now - self.last_progress)
        self.steps = steps
        self.last_progress = now

    def between_steps(self, on: bool) -> None:
        self.in_between = on
        self.last_progress = time.monotonic()

    def timeout(self) -> float:
        if self.in_between:
            return max(self.fixed_timeout or 0.0, DEFAULT_TIMEOUT_S)
        if self.fixed_timeout is not None:
            return self.fixed_timeout
        if len(self.step_times) < AUTO_AFTER_STEPS:
            return DEFAULT_TIMEOUT_S
        return max(AUTO_FACTOR * median(self.step_times), AUTO_FLOOR_S)

    def report_failure(self, err: BaseException) -> None:
        """Tell the other ranks why this one stops, and give them a few seconds to print it before it exits."""
        self.stopped.set()  # this thread's polls must not race the others' exit
        if self.store is None:
            return
        try:
            failed_first = self._failures()
        except Exception:  # the store is gone: this rank's own error is all there is to say
            failed_first = {}
        if failed_first:  # another rank failed first and this one's collective broke when it left
            self._stop_for_failure(failed_first)
        where = traceback.extract_tb(err.__traceback__)[-1:] if err.__traceback__ else []
        place = f" (at {os.path.basename(where[0].filename)}:{where[0].lineno})" if where else ""
        report = {"error": f"{type(err).__name__}: {err}"[:500] + place, "log": list(self.tail.lines)}
        try:
            self.store.set(f"failed/{self.rank}", json.dumps(report))
            self.store.add("failures", 1)
            deadline = time.monotonic() + 5.0
            while time.monotonic() < deadline and self.store.add("acks", 0) < self.world_size - 1:
                time.sleep(0.1)
        except Exception:  # the store is gone too: nothing more to tell
            pass

    def stop(self) -> None:
        """Stop polling and wait for a poll in flight: the process must not tear down the store's client while
        this thread is inside one of its calls (each gives up after STORE_TIMEOUT_S)."""
        self.stopped.set()
        logger.removeHandler(self.tail)
        if self.thread is not threading.current_thread():
            self.thread.join(timeout=self.poll_s + STORE_TIMEOUT_S + 5.0)

    # ------------------------------------------------------------------------------ the thread
    def _run(self) -> None:
        lost_since = None
        while not self.stopped.wait(self.poll_s):
            try:
                self._check()
                lost_since = None
            except Exception as err:  # the store lived in a process that is gone (rank 0 without torchrun)
                lost_since = lost_since or time.monotonic()
                if time.monotonic() - lost_since > self.dead_after_s:
                    self._exit(EXIT_PEER_FAILED, f"rank {self.rank}: lost contact with the other ranks' store at "
                               f"MASTER_ADDR:MASTER_PORT for {self.dead_after_s:.0f} s ({str(err).splitlines()[0]}); "
                               "rank 0 or the launcher is gone, stopping")

    def _check(self) -> None:
        states = self._swap_states()
        failed = self._failures()
        if failed:
            self._stop_for_failure(failed)
        dead = self._silent_ranks(states)
        if dead:
            self._stop_for_death(dead, states)
        stalled = time.monotonic() - self.last_progress > self.timeout()
        if stalled or self._flag("hangs"):
            if stalled:
                self._add("hangs", 1)
            self._stop_for_hang(states)

    def _state(self) -> dict:
        self.beats += 1
        phase = self.phases.phase
        return {"beat": self.beats, "steps": self.steps, "phase": phase,
                "phase_s": round(time.time() - self.phases.phase_since, 1), "log": list(self.tail.lines)}

    def _swap_states(self) -> dict[int, dict]:
        """Publish this rank's state and read everyone's (raises when the store is unreachable)."""
        mine = self._state()
        if self.store is None:
            return {self.rank: mine}
        self.store.set(f"state/{self.rank}", json.dumps(mine))
        states = {}
        for rank in range(self.world_size):
            key = f"state/{rank}"
            if self.store.check([key]):
                states[rank] = json.loads(self.store.get(key))
        return states

    def _failures(self) -> dict[int, dict]:
        if self.store is None or not self._flag("failures"):
            return {}
        reports = {}
        for rank in range(self.world_size):
            key = f"failed/{rank}"
            if rank != self.rank and self.store.check([key]):
                reports[rank] = json.loads(self.store.get(key))
        return reports

    def _silent_ranks(self, states: dict[int, dict]) -> list[int]:
        now = time.monotonic()
        silent = []
        for rank, state in states.items():
            beat, since = self.seen.get(rank, (-1, now))
            if state["beat"] != beat:
                self.seen[rank] = (state["beat"], now)
            elif now - since > self.dead_after_s:
                silent.append(rank)
        return silent

    def _flag(self, name: str) -> bool:
        return self.store is not None and self._add(name, 0) > 0

    def _add(self, name: str, amount: int) -> int:
        return self.store.add(f"{name}", amount) if self.store is not None else 0

    # ------------------------------------------------------------------------------ stopping
    def _stop_for_failure(self, failed: dict[int, dict]) -> None:
        parts = []
        for rank, report in sorted(failed.items()):
            lines = "\n".join(f"    {line}" for line in report["log"]) or "    (none)"
            parts.append(f"rank {rank} failed: {report['error']}\n  its last log lines:\n{lines}")
        self._add("acks", 1)
        time.sleep(0.5)  # the failed rank stops polling the store (which may live in this process) first
        self._exit(EXIT_PEER_FAILED, "\n".join(parts) + f"\nrank {self.rank} stops too: the run cannot go on "
                   "without it (its own error is printed above by that rank)")

    def _stop_for_death(self, dead: list[int], states: dict[int, dict]) -> None:
        parts = []
        for rank in dead:
            lines = "\n".join(f"    {line}" for line in states[rank]["log"]) or "    (none)"
            parts.append(f"rank {rank} stopped answering {self.dead_after_s:.0f} s ago (killed, out of memory, or "
                         f"its machine is gone); it was in {states[rank]['phase']} after {states[rank]['steps']} "
                         f"steps\n  its last log lines:\n{lines}")
        self._exit(EXIT_PEER_FAILED, "\n".join(parts) + f"\nrank {self.rank} stops too")

    def _stop_for_hang(self, states: dict[int, dict]) -> None:
        mine = states.get(self.rank) or self._state()
        frame = sys._current_frames().get(self.main_thread.ident)
        stack = "".join(traceback.format_stack(frame)) if frame is not None else "(no main thread)\n"
        print(f"[textdet watchdog] rank {self.rank}: no training step finished for {self.timeout():.0f} s "
              f"(train.step_timeout); in {mine['phase']} for {mine['phase_s']:.0f} s, waiting on "
              f"{WAITS_ON.get(mine['phase'], mine['phase'])}. Python stack of the main thread:\n{stack}",
              file=sys.stderr, flush=True)
        time.sleep(2 * self.poll_s)  # the other ranks publish their state and print their stacks too
        with contextlib.suppress(Exception):  # a store gone by now: report what was last seen
            states = self._swap_states()
        self._exit(EXIT_HANG, hang_summary(states, self.timeout()))

    def _exit(self, code: int, message: str) -> None:
        """Say it (rank 0: stdout and train.log; the others: stderr) and end the process at once: the main
        thread is stuck and cannot be asked to return."""
        if self.rank == 0:
            logger.error("%s", message)
        else:
            print(f"[textdet watchdog] {message}", file=sys.stderr, flush=True)
        for handler in logger.handlers:
            handler.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def hang_summary(states: dict[int, dict], timeout: float) -> str:
    """Which ranks are behind: fewest finished steps, then the earliest phase of the step."""
    def position(state: dict) -> tuple[int, int]:
        order = PHASES.index(state["phase"]) if state["phase"] in PHASES else len(PHASES)
        return state["steps"], order

    where = ", ".join(f"rank {r}: {s['steps']} steps, in {s['phase']} for {s['phase_s']:.0f} s"
                      for r, s in sorted(states.items()))
    slowest = min(position(s) for s in states.values())
    slow = sorted(r for r, s in states.items() if position(s) == slowest)
    if len(slow) == len(states) and len(states) > 1:
        verdict = (f"every rank is in {states[slow[0]]['phase']}: a collective that never completes (network, "
                   "backend) or the same hang in every process, not one slow rank")
    else:
        names = ", ".join(str(r) for r in slow)
        verdict = (f"slow rank(s): {names} (in {states[slow[0]]['phase']}; waiting on "
                   f"{WAITS_ON.get(states[slow[0]]['phase'], '?')}); the others wait for it")
    return (f"hang: no training step finished for {timeout:.0f} s (train.step_timeout); {verdict}. Ranks: {where}. "
            "Stacks are printed above by each rank; stopping the run")


def connect_store(world_size: int):
    """A client of the launcher's key-value store (MASTER_ADDR:MASTER_PORT), or None when running alone."""
    if world_size < 2:
        return None
    host, port = os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ.get("MASTER_PORT", "29500"))
    store = dist.TCPStore(host, port, is_master=False, timeout=timedelta(seconds=STORE_TIMEOUT_S),
                          wait_for_workers=False)
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")  # a restarted job does not read the last one's keys
    return dist.PrefixStore(f"textdet/watchdog/{attempt}/", store)
