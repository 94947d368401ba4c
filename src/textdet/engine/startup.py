"""Start-up breakdown: seconds per stage from process start to the first finished step, printed and written to
``startup.json`` (a user once waited an hour for a graph compile with nothing saying where the time went)."""

from __future__ import annotations

import json
import logging
import os
import time

from textdet import textdet_home

logger = logging.getLogger("textdet")


def process_start_time() -> float:
    """Wall-clock time at which this process started (Linux /proc), else the time of this import."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return time.time() - uptime + start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return _IMPORT_TIME


_IMPORT_TIME = time.time()


class StartupTimer:
    """Records consecutive stages; ``mark(name)`` closes the stage that ran since the last mark."""

    def __init__(self, t0: float | None = None):
        self.t0 = process_start_time() if t0 is None else t0
        self.last = self.t0
        self.stages: dict[str, float] = {}
        self.totals: dict[str, float] = {}

    def mark(self, name: str, return_stage: bool = False) -> float:
        """Close stage ``name``; returns seconds since process start (or the stage's own seconds)."""
        now = time.time()
        stage = now - self.last
        self.stages[name] = self.stages.get(name, 0.0) + stage
        self.last = now
        return stage if return_stage else now - self.t0

    def total(self, name: str) -> None:
        """Record the time from process start to now under ``name`` (e.g. total_to_first_step)."""
        self.totals[name] = time.time() - self.t0

    def table(self) -> str:
        width = max(len(k) for k in [*self.stages, *self.totals, "stage"])
        rows = [f"{'stage':<{width}}  seconds", f"{'-' * width}  -------"]
        rows += [f"{k:<{width}}  {v:7.2f}" for k, v in {**self.stages, **self.totals}.items()]
        return "\n".join(rows)

    def write(self, path: str) -> None:
        """``startup.json``: {"stages": {name: seconds}, total name: seconds, ...}."""
        data = {"stages": {k: round(v, 4) for k, v in self.stages.items()},
                **{k: round(v, 4) for k, v in self.totals.items()}}
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)


def enable_compile_cache() -> str:
    """Persist torch.compile's artefacts under ``$TEXTDET_HOME/compile_cache`` so only the first run compiles cold.
    A ``TORCHINDUCTOR_CACHE_DIR`` the user set wins; torch's /tmp default does not. Returns the folder used."""
    import getpass
    import tempfile

    current = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    torch_default = os.path.join(tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}")
    if not current or current == torch_default:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(textdet_home(), "compile_cache")
    folder = os.environ["TORCHINDUCTOR_CACHE_DIR"]
    os.makedirs(folder, exist_ok=True)
    try:
        import torch._inductor.config as inductor_config

        inductor_config.fx_graph_cache = True
        inductor_config.autotune_local_cache = True
    except (ImportError, AttributeError):  # older torch: the directory alone still helps
        pass
    logger.info("torch.compile cache: %s (the first run compiles; later runs reuse it)", folder)
    return folder


def want_compile(mode: str, system_mode: int, device_type: str, auto_on: bool) -> bool:
    """``--compile on/off/auto``: auto compiles when ``system.mode`` is 0 and ``auto_on``
    (``device.compiles_by_default``: CUDA only; minutes on the CPU, untested on the other accelerators: eager
    there unless ``--compile on``). Takes a flag, not the device module: the CLI imports this before torch."""
    if mode != "auto" or system_mode == 1:
        return mode == "on"
    if device_type == "cpu":
        logger.info("system.mode 0 (compiled): on CPU torch.compile costs minutes for ~10% speed; running eager "
                    "(force it with --compile on)")
    elif not auto_on:
        logger.info("system.mode 0 (compiled): --compile auto compiles on CUDA only; running eager on %s (force it "
                    "with --compile on, untested there)", device_type)
    return auto_on
