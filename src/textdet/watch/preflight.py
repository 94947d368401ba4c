"""Distributed pre-flight: before the process group starts, every process checks what makes 2-card jobs die with
errors nobody can explain (too many processes for the devices, two processes on one device, a busy or unreachable
master port, a missing backend or torch_npu, device pairs the hardware cannot link, environment variables that
break collectives). The processes of a node swap their findings through small files, so every rank fails within
seconds with the same paragraphs instead of one failing and the others waiting for a backend timeout."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import glob
import json
import os
import socket
import tempfile
import time
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist

from textdet import device as devices
from textdet.errors import TextdetError
from textdet.watch.startup import process_start_time

VISIBLE_VARS = devices.VISIBLE_DEVICE_VARS
IFNAME_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME")
EXCHANGE_WAIT_S = 60.0  # how long a process waits for the other processes of its node to reach the pre-flight
_DEVICE_LOCKS: list = []  # open lock files: held for the life of the process


class PreflightError(TextdetError):
    """A distributed launch that would fail or hang; the message holds one paragraph per cause."""


@dataclass
class Launch:
    """What the launcher (torchrun, SLURM, a script) told this process."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    master_addr: str
    master_port: int
    agent_store: bool  # torchrun's agent already listens on the master port

    @classmethod
    def from_env(cls) -> Launch:
        env = os.environ
        world = int(env.get("WORLD_SIZE", "1"))
        return cls(int(env.get("RANK", "0")), int(env.get("LOCAL_RANK", "0")), world,
                   int(env.get("LOCAL_WORLD_SIZE", world)), env.get("MASTER_ADDR", "127.0.0.1"),
                   int(env.get("MASTER_PORT", "29500")), env.get("TORCHELASTIC_USE_AGENT_STORE") == "True")


def physical_id(kind: str, index: int) -> str:
    """The device's id as the machine numbers it: the entry of CUDA_VISIBLE_DEVICES (or the NPU/XPU variable)."""
    visible = os.environ.get(VISIBLE_VARS.get(kind, ""), "")
    entries = [v.strip() for v in visible.split(",") if v.strip()]
    return entries[index] if index < len(entries) else str(index)


def device_problems(kind: str, visible: int, index: int | None, launch: Launch) -> list[str]:
    """More processes on this node than devices it can see; a device index past the visible ones."""
    if kind == "cpu":
        return []
    problems = []
    if launch.local_world_size > visible:
        problems.append(
            f"{launch.local_world_size} processes were started on this node but only {visible} {kind} device(s) "
            f"are visible ({VISIBLE_VARS.get(kind, 'the visible-devices variable')}="
            f"{os.environ.get(VISIBLE_VARS.get(kind, ''), 'unset')}). Each process needs its own device: lower "
            f"--nproc_per_node to {visible}, or make more devices visible.")
    elif index is not None and index >= visible:
        problems.append(f"this process asks for {kind}:{index} but only {visible} {kind} device(s) are visible; "
                        f"drop --device (each process then takes {kind}:LOCAL_RANK) or fix the device number.")
    return problems


def network_problems(launch: Launch) -> list[str]:
    """The master address resolves; the master port is free for rank 0 to listen on (unless torchrun holds it)."""
    try:
        socket.getaddrinfo(launch.master_addr, launch.master_port)
    except OSError as err:
        return [f"MASTER_ADDR={launch.master_addr} does not resolve ({err}): use the master node's IP address or a "
                "host name every node can resolve (--master_addr)."]
    problems = []
    if launch.world_size > launch.local_world_size and launch.master_addr in ("localhost", "127.0.0.1", "::1"):
        problems.append(f"MASTER_ADDR={launch.master_addr} with {launch.world_size} processes over several nodes: "
                        "the other nodes cannot reach a loopback address; set --master_addr to the master node's IP.")
    if launch.rank == 0 and not launch.agent_store and not port_free(launch.master_port):
        problems.append(f"MASTER_PORT={launch.master_port} is already in use on this machine (another training "
                        "job, or a stale process of an earlier one): pick a free port (--master_port, or "
                        "torchrun --standalone) or stop the process holding it (`ss -ltnp | grep "
                        f"{launch.master_port}`).")
    return problems


def port_free(port: int) -> bool:
    """Whether a listening socket could bind ``port`` now (TIME_WAIT leftovers do not count, as for the store)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("", port))
        except OSError:
            return False
    return True


def backend_problems(backend: str, kind: str) -> list[str]:
    """torch.distributed and the backend exist; on NPUs torch_npu is installed and built for this torch."""
    if not dist.is_available():
        return ["this torch build has no torch.distributed: install an official torch wheel to train on "
                "several devices, or train on one (no torchrun)."]
    problems = []
    if kind == "npu":
        problems += torch_npu_problems()
    if not problems and not dist.is_backend_available(backend):
        problems.append(f"the {backend} collective backend, which training on {kind} devices under torchrun uses, "
                        f"is not available in this torch build ({torch.__version__}): install an official torch "
                        "wheel for your devices (on NPUs torch_npu brings hccl), or train on one device.")
    return problems


def torch_npu_problems() -> list[str]:
    try:
        import torch_npu  # noqa: F401  (optional: only on Ascend machines)
    except ImportError:
        return ["training on NPUs needs torch_npu (it brings the hccl backend): pip install torch-npu matching "
                f"torch {torch.__version__} and your CANN version."]
    npu_version = getattr(torch_npu, "__version__", "")
    if npu_version.split("+")[0].split(".post")[0] != torch.__version__.split("+")[0]:
        return [f"torch_npu {npu_version} was built for another torch than this one ({torch.__version__}): install "
                "the torch_npu release made for your torch version (and CANN)."]
    return []


def pairing_problems(kind: str, device_name: str, physical_ids: list[str]) -> list[str]:
    """Ascend 910 (not 910B): HCCL links 1, 2, 4 or 8 devices, and 2 or 4 must stay within 0-3 or within 4-7."""
    if kind != "npu" or "910" not in device_name or "910B" in device_name or "910_9" in device_name:
        return []
    ids = sorted(int(i) for i in physical_ids if i.isdigit())
    count_ok = len(ids) in (1, 2, 4, 8)
    halves = {i // 4 for i in ids}
    if count_ok and (len(ids) == 8 or len(halves) == 1):
        return []
    return [f"{device_name} devices {ids}: HCCL on Ascend 910 links 1, 2, 4 or 8 devices, and a 2- or 4-device job "
            "must stay within devices 0-3 or within 4-7 (MindOCR's distributed tutorial). Choose e.g. "
            "ASCEND_RT_VISIBLE_DEVICES=0,1 or 4,5,6,7."]


def env_problems(env: dict[str, str] | None = None) -> list[str]:
    """Socket-interface variables naming interfaces this machine does not have (collectives then hang)."""
    env = os.environ if env is None else env
    names = [name for _, name in socket.if_nameindex()]
    problems = []
    for var in IFNAME_VARS:
        wanted = [w.strip().lstrip("=") for w in env.get(var, "").split(",") if w.strip()]
        wanted = [w for w in wanted if not w.startswith("^")]  # ^name excludes an interface
        if wanted and not any(n.startswith(w) for w in wanted for n in names):
            problems.append(f"{var}={env[var]} names no network interface of this machine (it has "
                            f"{', '.join(names)}): collectives would wait forever; unset it or name one of these.")
    return problems


def lock_device(kind: str, physical: str) -> str | None:
    """Hold a node-wide lock on the device for the life of the process; returns who holds it when another does."""
    folder = os.path.join(tempfile.gettempdir(), "textdet-devices")
    os.makedirs(folder, exist_ok=True)
    handle = open(os.path.join(folder, f"{kind}{physical}.lock"), "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = handle.read().strip()
        handle.close()
        return holder or "another process"
    handle.truncate(0)
    handle.write(f"pid {os.getpid()} ({' '.join(_cmdline(os.getpid()))[:120]})")
    handle.flush()
    _DEVICE_LOCKS.append(handle)
    return None


def _cmdline(pid: int) -> list[str]:
    with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().decode(errors="replace").split("\0")
    return []


@dataclass
class Claim:
    """One process's findings, swapped with the other processes of its node."""

    rank: int
    local_rank: int
    pid: int
    device: str
    physical: str
    holder: str | None
    problems: list[str]
    time: float


def exchange(launch: Launch, claim: Claim, wait_s: float = EXCHANGE_WAIT_S) -> tuple[str, list[Claim]]:
    """Write this process's claim and wait until the node's others are in or one has problems; returns the path of
    this process's claim (removed at exit only after a clean pre-flight: slower ranks still read a failed one) and
    the claims, by rank."""
    key = f"{os.getppid()}-{launch.master_addr}-{launch.master_port}-{os.environ.get('TORCHELASTIC_RESTART_COUNT', 0)}"
    folder = os.path.join(tempfile.gettempdir(), "textdet-preflight", key)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"local_rank{launch.local_rank}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(asdict(claim), f)
    os.replace(path + ".tmp", path)
    oldest = process_start_time() - 30  # claims of an earlier launch from the same parent are ignored
    deadline = time.monotonic() + wait_s
    while True:
        claims = [c for c in _read_claims(folder) if c.time >= oldest]
        if len(claims) >= launch.local_world_size or any(c.problems for c in claims):
            return path, sorted(claims, key=lambda c: c.rank)
        if time.monotonic() > deadline:
            seen = sorted(c.local_rank for c in claims)
            raise PreflightError(f"distributed pre-flight: only local ranks {seen} of {launch.local_world_size} "
                                 f"reached the pre-flight within {wait_s:.0f} s; the others died or hang during "
                                 "start-up (see their output above).")
        time.sleep(0.1)


def _read_claims(folder: str) -> list[Claim]:
    claims = []
    for path in glob.glob(os.path.join(folder, "local_rank*.json")):
        with contextlib.suppress(OSError, ValueError, TypeError), open(path) as f:
            claims.append(Claim(**json.load(f)))
    return claims


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)


def check(device: torch.device, backend: str, launch: Launch | None = None) -> None:
    """Run every check on this process, swap findings with the node's other processes, raise if any failed."""
    started = time.monotonic()
    launch = launch or Launch.from_env()
    kind = device.type
    visible = torch.accelerator.device_count() if kind != "cpu" else 0
    index = device.index if device.index is not None else launch.local_rank
    problems = backend_problems(backend, kind) + network_problems(launch) + env_problems()
    problems += device_problems(kind, visible, index if kind != "cpu" else None, launch)
    physical = physical_id(kind, index) if kind != "cpu" else ""
    holder = lock_device(kind, physical) if kind != "cpu" and not problems else None
    claim = Claim(launch.rank, launch.local_rank, os.getpid(), f"{kind}:{index}" if kind != "cpu" else "cpu",
                  physical, holder, problems, time.time())
    claim_path, claims = exchange(launch, claim)
    found: dict[str, list[int]] = {}  # paragraph -> the ranks that found it
    for c in claims:
        for problem in c.problems:
            found.setdefault(problem, []).append(c.rank)
    for problem in shared_device_problems(kind, claims):
        found[problem] = []
    if kind == "npu" and not found:
        name = devices.device_name(kind, index)
        for problem in pairing_problems(kind, name, [c.physical for c in claims]):
            found[problem] = []
    if not found:
        atexit.register(_remove, claim_path)
        return
    paragraphs = "\n\n".join(f"[{_who(ranks)}] {problem}" for problem, ranks in found.items())
    raise PreflightError(f"distributed pre-flight failed in {time.monotonic() - started:.1f} s ({len(found)} "
                         f"problem(s), seen from rank {launch.rank}):\n\n{paragraphs}")


def _who(ranks: list[int]) -> str:
    if not ranks:
        return "this node"
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(str(r) for r in ranks)}"


def shared_device_problems(kind: str, claims: list[Claim]) -> list[str]:
    """Two processes of this job on one device, or a device held by a process outside it."""
    if kind == "cpu":
        return []
    problems = []
    by_device: dict[str, list[int]] = {}
    for c in claims:
        by_device.setdefault(c.physical, []).append(c.rank)
    for physical, ranks in sorted(by_device.items()):
        if len(ranks) > 1:
            problems.append(f"ranks {ranks} all run on {kind} device {physical}: one device per process. Drop "
                            f"--device (each process then takes {kind}:LOCAL_RANK) and do not set "
                            f"{VISIBLE_VARS.get(kind, 'the visible-devices variable')} per process.")
    pids = {str(c.pid) for c in claims}
    for c in claims:
        if c.holder and c.holder.split()[1:2] and c.holder.split()[1] not in pids:
            problems.append(f"{kind} device {c.physical} (rank {c.rank}) is held by {c.holder}, a process outside "
                            "this job (a stale run?): stop it, or use other devices.")
    return problems
