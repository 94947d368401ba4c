"""The checks issue 26 added to benchmarks/gpu_check.py, run on the CPU so that their code is exercised before a GPU
ever runs them (the compiled step with dynamo's eager backend: inductor would take minutes here)."""

from __future__ import annotations

import importlib.util
import os

import pytest

GPU_CHECK = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "gpu_check.py")


@pytest.fixture(scope="module")
def cpu_context(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("gpu_check", GPU_CHECK)
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    # 64x64 crops, batch 2: the same code paths at a CPU test's size (this module's own copy of the table)
    gpu_check.TINY.update({"train.dataset.transform_pipeline.6.RandomCropWithBBox.crop_size": "[64, 64]",
                           "train.loader.batch_size": 2, "train.loader.num_workers": 0})
    ctx = gpu_check.make_context("cpu", str(tmp_path_factory.mktemp("gpu_check")))
    return gpu_check, {**ctx, "compile_backend": "eager"}


def test_bucketed_eval_check_on_the_cpu(cpu_context):
    """4 images of 256x192 and 4 of 448x336: auto keeps both sizes as buckets, 2 shapes either way."""
    gpu_check, ctx = cpu_context
    result = gpu_check.check_bucketed_eval(ctx)
    assert result["input_shapes_plain"] == 2
    assert result["input_shapes_bucketed"] == 2
    assert result["f_score_bucketed"] == result["f_score_plain"]


def test_bf16_vs_fp16_check_on_the_cpu(cpu_context):
    gpu_check, ctx = cpu_context
    result = gpu_check.check_bf16_vs_fp16(ctx)
    assert result["device_default"] == "bfloat16"
    assert result["bf16"]["loss_scaling"] is False
    assert result["fp16"]["loss_scaling"] is True


def test_compiled_step_check_on_the_cpu(cpu_context):
    gpu_check, ctx = cpu_context
    result = gpu_check.check_compiled_step(ctx)
    assert (result["frames"], result["graph_breaks"], result["recompiles"]) == (1, 0, 0)
