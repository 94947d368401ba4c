"""Downloading weights files into the torch hub cache.
As torchvision: ``torch.hub.get_dir()/checkpoints`` under the URL's base name, a ``-<hex>.ext`` name checked
against the sha256 prefix, complete files only (temp + rename). ``TEXTDET_OFFLINE=1`` never touches the
network; under torchrun local rank 0 downloads while the others wait, and a failure it writes down stops them."""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import re
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch

from textdet.errors import ConfigError

OFFLINE_ENV = "TEXTDET_OFFLINE"
TIMEOUT_S = 10.0  # connect and per-read timeout: no network fails in seconds, not minutes
RANK_WAIT_S = 3600.0  # how long ranks > 0 wait for local rank 0's download
RANK_POLL_S = 0.5
# torchvision's ``-<sha256 prefix>.ext``; a suffix of digits only is a date or a version (dbnet-20240101.ckpt), not
# a hash, so at least one of a-f is required.
_HASH = re.compile(r"-([0-9a-f]*[a-f][0-9a-f]*)\.[A-Za-z0-9]+$")


def is_url(value: Any) -> bool:
    """Whether a weights setting names a download (http/https) rather than a local file."""
    return isinstance(value, str) and value.startswith(("http://", "https://"))


def hub_checkpoint_dir() -> Path:
    """The folder torchvision downloads into: ``torch.hub.get_dir()/checkpoints`` (follows $TORCH_HOME)."""
    return Path(torch.hub.get_dir()) / "checkpoints"


def download(url: str, what: str, escape: str, folder: str | os.PathLike | None = None,
             timeout: float = TIMEOUT_S, progress: bool | None = None) -> Path:
    """The cached copy of ``url`` in ``folder`` (default ``hub_checkpoint_dir()``), downloaded first if needed; a
    failure is a ConfigError naming ``what`` (the config key), the folder and ``escape`` (how to do without it)."""
    if folder is None:
        folder = hub_checkpoint_dir()
    folder = Path(folder)
    dest = folder / os.path.basename(urlparse(url).path)
    if dest.is_file():
        return dest
    by_hand = (f"copy the file there by hand (e.g. curl -L {url} -o {dest}), give a local path in {what}, "
               f"or do without it: {escape}")
    if os.environ.get(OFFLINE_ENV, "") not in ("", "0"):
        raise ConfigError(f"{what}: {dest.name} is not in {folder} and {OFFLINE_ENV} is set; {by_hand}")
    failed = _failure_note(dest)
    if int(os.environ.get("LOCAL_RANK", "0")) > 0:  # torchrun: local rank 0 downloads, the others wait
        return _wait_for_rank0(dest, failed, what)
    try:
        return _fetch(url, dest, what, by_hand, timeout, progress)
    except ConfigError as exc:
        if "LOCAL_RANK" in os.environ:  # under torchrun: the waiting ranks stop with this reason
            with contextlib.suppress(OSError):
                failed.write_text(str(exc), encoding="utf-8")
        raise


def _failure_note(dest: Path) -> Path:
    """Where local rank 0 writes why its download of ``dest`` failed: named after torchrun's agent process (the
    ranks' common parent), so a note left by an earlier job is never read."""
    return dest.parent / f".{dest.name}.failed-{os.getppid()}"


def _wait_for_rank0(dest: Path, failed: Path, what: str) -> Path:
    """Poll until local rank 0 has put ``dest`` in place, or has written why it could not."""
    deadline = time.monotonic() + RANK_WAIT_S
    while not dest.is_file():
        if failed.is_file():
            reason = failed.read_text(encoding="utf-8")
            raise ConfigError(f"{what}: local rank 0 could not download {dest.name}: {reason}")
        if time.monotonic() > deadline:
            raise ConfigError(f"{what}: waited {RANK_WAIT_S:.0f} s for local rank 0 to download {dest}")
        time.sleep(RANK_POLL_S)
    return dest


def _fetch(url: str, dest: Path, what: str, by_hand: str, timeout: float, progress: bool | None) -> Path:
    """Download ``url`` to a temp file in ``dest``'s folder, check the name's hash, rename; ConfigError on failure."""
    folder = dest.parent
    tmp = None
    if progress is None:
        progress = sys.stderr.isatty()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=folder)
        with os.fdopen(fd, "wb") as f:
            digest = _transfer(url, f, timeout, progress)
        match = _HASH.search(dest.name)
        if match and not digest.startswith(match.group(1)):
            raise ConfigError(f"{what}: {url} does not match the sha256 prefix in its name ({match.group(1)}, got "
                              f"{digest[: len(match.group(1))]}); refused, nothing kept in {folder}. A proxy or a "
                              f"changed file? {by_hand}")
        os.replace(tmp, dest)
    except ConfigError:  # the hash check's own message (a ConfigError is a ValueError too)
        raise
    except (OSError, http.client.HTTPException, ValueError) as exc:  # URLError is an OSError
        raise ConfigError(f"{what}: cannot download {url} to {folder} ({exc}); {by_hand}") from None
    finally:
        if tmp and os.path.exists(tmp):
            os.remove(tmp)
    return dest


def _transfer(url: str, out: Any, timeout: float, progress: bool) -> str:
    """Stream ``url`` into ``out``; returns the sha256 hex digest. A short body raises ValueError."""
    from tqdm import tqdm

    sha = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 (http(s) only, checked by is_url)
        length = int(resp.headers.get("Content-Length") or 0)  # 0 when the header is absent or empty
        size = length if length != 0 else None  # None: size unknown, not checked
        done = 0
        with tqdm(total=size, unit="B", unit_scale=True, desc=os.path.basename(url), disable=not progress) as bar:
            while chunk := resp.read(1 << 16):
                out.write(chunk)
                sha.update(chunk)
                done += len(chunk)
                bar.update(len(chunk))
    if size is not None and done != size:
        raise ValueError(f"transfer cut short: {done} of {size} bytes")
    return sha.hexdigest()

