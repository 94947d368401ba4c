"""Every device-specific decision in one place: which device, its streams, sync, memory, half dtype, backend.
Built on ``torch.accelerator`` so CUDA, Ascend NPU (``torch_npu``), XPU and MPS share one code path; the rest
of textdet asks ``is_accelerator(device)`` and never names a vendor."""

from __future__ import annotations

import contextlib
import importlib
import os

import torch

from textdet.errors import ConfigError, TextdetError

# Distributed backends; torch_npu registers "npu" -> "hccl" on import, this table is the fallback.
_BACKENDS = {"cuda": "nccl", "npu": "hccl", "xpu": "xccl"}
_PLUGINS = {"npu": "torch_npu"}  # device types that need an extra package imported to exist
_ORT = {"cuda": "CUDAExecutionProvider", "npu": "CANNExecutionProvider"}  # ONNX Runtime's name per device


def _load_plugin(kind: str) -> None:
    if kind in _PLUGINS:
        try:
            importlib.import_module(_PLUGINS[kind])
        except ImportError:
            pkg = _PLUGINS[kind]
            raise TextdetError(f"--device {kind}: needs the {pkg} package (pip install {pkg.replace('_', '-')} "
                               "matching your torch and CANN); or use --device cpu") from None


def accelerator() -> str | None:
    """The accelerator type torch can use here ("cuda", "npu", "xpu", "mps"), or None."""
    if not torch.accelerator.is_available():
        return None
    acc = torch.accelerator.current_accelerator()
    return acc.type if acc is not None else None


def pick_device(name: str | None = None) -> torch.device:
    """``--device`` (cpu, cuda:N, npu:N, xpu, mps) or the (local rank's) accelerator, else the CPU; checked."""
    if not name:
        kind = accelerator()
        return torch.device(kind, int(os.environ.get("LOCAL_RANK", "0"))) if kind else torch.device("cpu")
    kind = str(name).partition(":")[0]
    _load_plugin(kind)
    try:
        device = torch.device(name)
    except RuntimeError as e:
        raise TextdetError(f"--device {name}: {e}; expected cpu, cuda[:N], npu[:N], xpu[:N] or mps") from None
    if device.type != "cpu" and accelerator() != device.type:
        raise TextdetError(f"--device {name}: no {device.type} device is available here (torch {torch.__version__}, "
                           f"accelerator: {accelerator() or 'none'}); use --device cpu")
    if device.index is not None and device.index >= torch.accelerator.device_count():
        raise TextdetError(f"--device {name}: only {torch.accelerator.device_count()} {device.type} device(s) visible")
    return device


def is_accelerator(device: torch.device) -> bool:
    """Not the CPU: streams, pinned memory, channels_last and device-side thresholding pay off."""
    return device.type != "cpu"


def compiles_by_default(device_type: str) -> bool:
    """``--compile auto``: torch.compile on CUDA only, the one accelerator its help names; inductor on NPU,
    MPS and XPU is untested here."""
    return device_type == "cuda"


HALF_TYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}  # system.amp_dtype


def supports_bf16(device_type: str) -> bool:
    """Whether ``device_type`` computes in bf16: the CPU always (emulated without AVX512-BF16/AMX, see
    ``cpu_bf16_fast``); an accelerator when its torch module says so (CUDA from Ampere on: A100, H100; Ascend
    910B through torch_npu), else not (V100, T4, or a module without ``is_bf16_supported``)."""
    if device_type == "cpu":
        return True
    check = getattr(getattr(torch, device_type, None), "is_bf16_supported", None)
    if check is None:
        return False
    try:
        return bool(check())
    except (RuntimeError, AssertionError):  # a torch built without this device's runtime
        return False


def half_dtype(device_type: str, requested: str | None = None) -> torch.dtype:
    """Autocast dtype for O1-O3, ``system.amp_dtype``: ``requested`` "bf16" or "fp16"; None = bf16 where the
    device supports it (no loss scaling, and the fp16 DB-head NaNs PaddleOCR met never happen), fp16
    otherwise."""
    if requested is None:
        return torch.bfloat16 if supports_bf16(device_type) else torch.float16
    if requested not in HALF_TYPES:
        raise ConfigError(f"system.amp_dtype must be one of {list(HALF_TYPES)}, got {requested!r}")
    if requested == "bf16" and not supports_bf16(device_type):
        raise ConfigError(
            f"system.amp_dtype: bf16, but this {device_type} device has no bf16 support (torch."
            f"{device_type}.is_bf16_supported() is False): set system.amp_dtype: fp16 (loss scaling "
            "on) or remove the key"
        )
    return HALF_TYPES[requested]


def dist_backend(device_type: str) -> str:
    """nccl on CUDA, hccl on Ascend, xccl on XPU, gloo otherwise (or when the library is missing)."""
    backend = torch.distributed.Backend.default_device_backend_map.get(device_type) or _BACKENDS.get(
        device_type
    )
    if backend == "nccl" and not torch.distributed.is_nccl_available():
        return "gloo"
    return backend or "gloo"


def set_device(device_type: str, index: int) -> None:
    """Bind this process to accelerator ``index`` (torchrun's LOCAL_RANK); checks it exists."""
    n = torch.accelerator.device_count()
    if index >= n:
        raise TextdetError(
            f"LOCAL_RANK={index} but only {n} {device_type} device(s) are visible: lower "
            "--nproc_per_node or check the visible-devices variable"
        )
    torch.accelerator.set_device_index(index)


def device_name(kind: str, index: int) -> str:
    """The marketing name of accelerator ``index`` (``Ascend910A``, ``NVIDIA H100``, ...)."""
    return torch.get_device_module(kind).get_device_name(index)


def synchronize(device: torch.device) -> None:
    """Wait for queued work (timings); a no-op on the CPU."""
    if is_accelerator(device):
        torch.accelerator.synchronize(device)


def new_stream(device: torch.device) -> torch.Stream | None:
    return torch.Stream(device) if is_accelerator(device) else None


def use_stream(stream: torch.Stream | None):
    """Context that makes ``stream`` current (nothing for None)."""
    return stream if stream is not None else contextlib.nullcontext()


def current_stream(device: torch.device) -> torch.Stream:
    return torch.accelerator.current_stream(device)


def max_memory_gib(device: torch.device) -> float | None:
    """Peak allocated memory in GiB since start (None on the CPU)."""
    return torch.accelerator.max_memory_allocated(device) / 2**30 if is_accelerator(device) else None


def rng_state() -> dict:
    """The current accelerator's RNG state for a checkpoint (empty without one): that device's generator only,
    so a resume with fewer visible devices still loads, and MPS (no ``get_rng_state_all``) works too."""
    kind = accelerator()
    return {kind: torch.get_device_module(kind).get_rng_state()} if kind else {}


def set_rng_state(state: dict) -> None:
    """Restore ``rng_state()``'s generator on the current device; states of another device type are ignored."""
    kind = accelerator()
    saved = state.get(kind) if kind else None
    if isinstance(
        saved, torch.Tensor
    ):  # older checkpoints held a list per visible device: nothing to restore
        torch.get_device_module(kind).set_rng_state(saved)


def set_deterministic(enabled: bool) -> None:
    """``system.deterministic``: deterministic kernels only (an op without one raises, naming it) and cuDNN
    without autotuning, for a bit-exact resume on a GPU. It costs speed (cuDNN may not pick its fastest
    convolution; some ops fall back to slower kernels), not measured here: not yet run on a GPU. cuBLAS needs
    its workspace variable set before the first matrix product to be deterministic."""
    if not enabled:
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def cpu_bf16_fast() -> bool:
    """Whether this CPU has native bf16 math (AVX512-BF16 or AMX); without it bf16 autocast is emulated."""
    return bool({"avx512_bf16", "amx_bf16"} & _cpu_flags())


def cpu_int8_fast() -> bool:
    """Whether this CPU has int8 dot-product instructions (VNNI or AMX), which ONNX Runtime's int8 kernels
    need to run faster than its fp32 ones."""
    return bool({"avx512_vnni", "avx_vnni", "amx_int8"} & _cpu_flags())


def _cpu_flags() -> set[str]:
    if not os.path.exists("/proc/cpuinfo"):
        return set()
    with open("/proc/cpuinfo") as f:
        return set(f.read().split())


def ort_providers(device: str | None, available: list[str]) -> list:
    """ONNX Runtime providers for ``--device`` (that device, then CPU); None: the first accelerator one, then CPU."""
    if device is None:
        return [p for p in available if p in _ORT.values()][:1] + ["CPUExecutionProvider"]
    kind, _, index = str(device).partition(":")
    if kind == "cpu":
        return ["CPUExecutionProvider"]
    if kind not in _ORT:
        raise TextdetError(
            f"--device {device}: expected cpu, {', '.join(f'{k} or {k}:N' for k in _ORT)} for an ONNX model"
        )
    if _ORT[kind] not in available:
        raise TextdetError(
            f"--device {device}: this onnxruntime has no {_ORT[kind]} (available: {available}); "
            "install the onnxruntime build for it, or use --device cpu"
        )
    return [(_ORT[kind], {"device_id": int(index or 0)}), "CPUExecutionProvider"]


# The variable that limits which devices a process sees, per device type (the distributed pre-flight reads it).
VISIBLE_DEVICE_VARS = {
    "cuda": "CUDA_VISIBLE_DEVICES",
    "npu": "ASCEND_RT_VISIBLE_DEVICES",
    "xpu": "ZE_AFFINITY_MASK",
}


def profiler_activities(device_type: str) -> list:
    """torch.profiler activities for a device: the CPU, plus the device's own where torch has one."""
    from torch.profiler import ProfilerActivity

    device_activity = {"cuda": ProfilerActivity.CUDA, "xpu": ProfilerActivity.XPU}
    activities = [ProfilerActivity.CPU]
    if device_type in device_activity:
        activities.append(device_activity[device_type])
    return activities
