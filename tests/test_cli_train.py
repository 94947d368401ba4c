"""End to end through the real CLI on a tiny config (torchtune style): train, resume, eval, and
the engine's promises — pinned first loss, exact resume, accumulation, EMA in best.ckpt."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
import yaml

from conftest import RECIPE, USER_CFG, tiny_overrides
from textdet.build.training import build_trainer
from textdet.cli import main
from textdet.config import load_config
from textdet.engine.finetune import freeze_batchnorm
from textdet.engine.trainer import Trainer
from textdet.errors import ConfigError


def run_cli(*args: str) -> int:
    return main(list(args))


def cli_args(cmd: str, opts: list[str], *extra: str) -> list[str]:
    out = [cmd, "-c", RECIPE]
    for o in opts:
        out += ["-o", o]
    return out + list(extra)


def read_jsonl(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def two_then_three(synth_root, tmp_path_factory):
    """A 3-epoch run killed during epoch 3 then resumed, and the same run trained straight through."""
    base = tmp_path_factory.mktemp("runs")
    resumed, straight = str(base / "resumed"), str(base / "straight")
    real_epoch = Trainer.train_one_epoch

    def killed_in_third_epoch(self, epoch):
        if epoch == 2:
            raise KeyboardInterrupt  # what Ctrl-C or a kill does mid-epoch
        return real_epoch(self, epoch)

    opts = tiny_overrides(synth_root, resumed, **{"scheduler.num_epochs": 3})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Trainer, "train_one_epoch", killed_in_third_epoch)
        assert run_cli(*cli_args("train", opts, "--no-progress")) == 130
    after_two = sorted(os.listdir(resumed))
    assert run_cli(*cli_args("train", opts + ["model.resume=True"], "--no-progress")) == 0
    assert run_cli(*cli_args("train", tiny_overrides(synth_root, straight, **{"scheduler.num_epochs": 3}),
                             "--no-progress")) == 0
    return resumed, straight, after_two


def test_run_folder_layout(two_then_three):
    resumed, _, after_two = two_then_three
    for name in ("train_config.yaml", "train.log", "metrics.jsonl", "startup.json", "best.ckpt", "e1.ckpt",
                 "e2.ckpt", "train_resume.ckpt"):
        assert name in after_two, name
    startup = json.load(open(os.path.join(resumed, "startup.json")))
    assert {"total_to_first_batch", "total_to_first_step"} <= set(startup)
    assert startup["total_to_first_step"] >= startup["total_to_first_batch"] > 0
    assert "first batch ready" in startup["stages"] and "model build + weights" in startup["stages"]
    resolved = yaml.safe_load(open(os.path.join(resumed, "train_config.yaml")))
    assert resolved["model"]["backbone"]["width"] == 8
    log = open(os.path.join(resumed, "train.log")).read()
    assert "epoch: [1/3] step: [2/6], loss:" in log and "fps per card" in log and "data wait" in log
    assert "Total number of trainable parameters" in log and "verdict:" in log and "Performance:" in log


def test_first_loss_is_pinned(two_then_three):
    """Seed 42, tiny recipe, CPU: the first epoch's mean loss is a fixed number (update it on purpose only)."""
    _, straight, _ = two_then_three
    records = read_jsonl(os.path.join(straight, "metrics.jsonl"))
    assert records[0]["loss"] == pytest.approx(PINNED_FIRST_EPOCH_LOSS, rel=1e-4)


# Re-pinned (was 16.954945) when the ResNet stem max-pool moved to MindSpore's "same" padding (one pixel at
# the bottom/right only), which MindOCR parity needs: the stride-4 features shift by one pixel.
# Re-pinned (was 17.275609) when the built-in recipe moved to lr 0.004 and the synthetic training split to more
# lines of words (issue 10).
PINNED_FIRST_EPOCH_LOSS = 16.411439


def test_resume_continues_exactly(two_then_three):
    resumed, straight, _ = two_then_three
    a, b = read_jsonl(os.path.join(resumed, "metrics.jsonl")), read_jsonl(os.path.join(straight, "metrics.jsonl"))
    assert [r["epoch"] for r in a] == [1, 2, 3] == [r["epoch"] for r in b]
    # 2 epochs + resume + 1 epoch == 3 epochs straight: same LR position, same losses, same weights
    assert [r["lr"] for r in a] == pytest.approx([r["lr"] for r in b], rel=1e-12)
    assert [r["loss"] for r in a] == pytest.approx([r["loss"] for r in b], rel=1e-5)
    ra = torch.load(os.path.join(resumed, "train_resume.ckpt"), weights_only=False)
    rb = torch.load(os.path.join(straight, "train_resume.ckpt"), weights_only=False)
    assert ra["step"] == rb["step"] == 18 and ra["epoch"] == 3
    for k, v in rb["model"].items():
        torch.testing.assert_close(ra["model"][k], v, rtol=1e-5, atol=1e-6)


def test_eval_finds_best_ckpt_through_config(two_then_three, capsys):
    resumed, _, _ = two_then_three
    root = load_config(RECIPE, tiny_overrides("x", resumed)).eval.ckpt_load_path
    assert root == os.path.join(resumed, "best.ckpt")
    synth = yaml.safe_load(open(os.path.join(resumed, "train_config.yaml")))["eval"]["dataset"]["dataset_root"]
    opts = tiny_overrides(synth, resumed)
    capsys.readouterr()
    assert run_cli(*cli_args("eval", opts, "--json")) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert {"recall", "precision", "f-score", "images", "img_per_s"} <= set(result)
    assert result["images"] == 4 and result["checkpoint"] == os.path.join(resumed, "best.ckpt")
    # the figures logged during training for the epoch best.ckpt holds (the first best one)
    records = read_jsonl(os.path.join(resumed, "metrics.jsonl"))
    best = max(records, key=lambda r: r["f-score"])
    assert {k: result[k] for k in ("recall", "precision", "f-score")} == {
        k: best[k] for k in ("recall", "precision", "f-score")}


def test_resume_true_without_file_starts_fresh(synth_root, tmp_path, caplog):
    opts = tiny_overrides(synth_root, str(tmp_path / "r"), **{"scheduler.num_epochs": 1, "model.resume": True})
    assert run_cli(*cli_args("train", opts, "--no-progress")) == 0
    log = open(tmp_path / "r" / "train.log").read()
    assert "no checkpoint at" in open(tmp_path / "r" / "train.log").read() or "starting fresh" in log


def _trainer(cfg_overrides: dict, synth_root: str, run_dir: str) -> Trainer:
    cfg = load_config(RECIPE, tiny_overrides(synth_root, run_dir, **cfg_overrides))
    return build_trainer(cfg, device="cpu", progress=False)


def test_gradient_accumulation_matches_big_batch(synth_root, tmp_path):
    """k=2 micro-batches of [a, b] == one batch [a, b, a, b] (BN frozen; DB losses are batch ratios,
    so duplicating a batch leaves the loss function unchanged)."""
    opt = {"optimizer.opt": "sgd", "optimizer.momentum": 0.0, "scheduler.scheduler": "constant"}
    big = _trainer({**opt, "train.loader.batch_size": 4}, synth_root, str(tmp_path / "a"))
    acc = _trainer({**opt, "train.gradient_accumulation_steps": 2}, synth_root, str(tmp_path / "b"))
    acc.model.load_state_dict(big.model.state_dict())
    batch = next(iter(acc.train_loader))
    batch = acc.feed(batch)
    doubled = {k: torch.cat([v, v]) if torch.is_tensor(v) else v for k, v in batch.items()}
    for t in (big, acc):
        freeze_batchnorm(t.model)
    big.train_step(doubled, sync=True)
    big.optimizer_step()
    acc.train_step(batch, sync=False)
    acc.train_step(batch, sync=True)
    acc.optimizer_step()
    for (name, p), q in zip(big.model.named_parameters(), acc.model.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6, msg=name)
    assert big.global_step == acc.global_step == 1


def test_ema_is_what_best_ckpt_holds(synth_root, tmp_path):
    run = str(tmp_path / "ema")
    opts = tiny_overrides(synth_root, run, **{"train.ema": True, "train.ema_decay": 0.9, "scheduler.num_epochs": 1})
    assert run_cli(*cli_args("train", opts, "--no-progress")) == 0
    best = torch.load(os.path.join(run, "best.ckpt"), weights_only=False)["model"]
    resume = torch.load(os.path.join(run, "train_resume.ckpt"), weights_only=False)
    ema, raw = resume["ema"]["module"], resume["model"]
    assert resume["ema"]["updates"] == 6
    key = "head.segm.0.weight" if "head.segm.0.weight" in raw else next(k for k in raw if k.endswith("weight"))
    assert not torch.equal(ema[key], raw[key])
    for k in best:
        assert torch.equal(best[k], ema[k])
    # resuming: the EMA state comes back (default), or restarts from the weights as MindOCR's does (reset)
    for mode, updates, source in (("keep", 6, ema), ("reset", 0, raw)):
        more = {"train.ema": True, "train.ema_decay": 0.9, "model.resume": True, "train.ema_resume": mode}
        resumed = _trainer(more, synth_root, run)
        assert resumed.ema.updates == updates
        torch.testing.assert_close(resumed.ema.module.state_dict()[key], source[key])


def test_dry_run_console_script(synth_root, tmp_path):
    """The installed entry point, as a user runs it: validates and exits without a step."""
    opts = tiny_overrides(synth_root, str(tmp_path / "dry"))
    cmd = [sys.executable, "-m", "textdet", *cli_args("train", opts, "--dry-run")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Total number of trainable parameters" in out.stdout and "dry run" in out.stdout
    assert not os.path.exists(tmp_path / "dry" / "train_resume.ckpt")


def test_bad_config_fails_fast_with_location(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(open(RECIPE).read().replace("box_thresh: 0.7", "box_tresh: 0.7"))
    cmd = [sys.executable, "-m", "textdet", "train", "-c", str(bad), "-o", "train.dataset.dataset_root=/nonexistent"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "postprocess" in out.stderr and "box_tresh" in out.stderr and "did you mean 'box_thresh'" in out.stderr
    assert "Traceback" not in out.stderr


def test_dry_run_with_compile_and_a_bad_optimizer_setting(synth_root, tmp_path, capsys):
    """torch.compile and the optimizer thread both import torch._dynamo: the start waits for the thread instead of
    racing it; torch's own check of an optimizer setting fails the dry run as a config error, not later."""
    opts = [a for o in tiny_overrides(synth_root, str(tmp_path / "run")) for a in ("-o", o)]
    assert main(["train", "--dry-run", "--compile", "on", *opts]) == 0
    assert main(["train", "--dry-run", *opts, "-o", "optimizer.opt=adam", "-o", "optimizer.beta1=1.5"]) == 2
    err = capsys.readouterr().err
    assert "optimizer (adam): Invalid beta parameter" in err and "Traceback" not in err


def test_threshold_branch_without_its_targets_is_a_config_error(synth_root, tmp_path, capsys):
    """A head whose threshold branch trains needs the thresh_map / thresh_mask columns: the dry run names both
    keys and the two ways out, instead of the loss failing in the first step; without the branch it runs."""
    opts = [a for o in tiny_overrides(synth_root, str(tmp_path / "run")) for a in ("-o", o)]
    p_only = ["-o", "train.dataset.output_columns=[image, binary_map, mask]",
              "-o", "train.dataset.label_column_index=[1, 2]"]
    assert main(["train", "--dry-run", *opts, *p_only]) == 2
    err = capsys.readouterr().err
    assert "model.head.adaptive is true" in err and "has no ['thresh_map', 'thresh_mask']" in err
    assert "set model.head.adaptive: false" in err and "Traceback" not in err
    assert main(["train", "--dry-run", *opts, *p_only, "-o", "model.head.adaptive=false"]) == 0


def test_gap_penalty_without_its_band_is_a_config_error(synth_root, tmp_path, capsys):
    """loss.gap_weight needs BorderMap's thresh_mask among the loss columns: the dry run names the keys."""
    opts = [a for o in tiny_overrides(synth_root, str(tmp_path / "run")) for a in ("-o", o)]
    p_only = ["-o", "train.dataset.output_columns=[image, binary_map, mask]",
              "-o", "train.dataset.label_column_index=[1, 2]", "-o", "model.head.adaptive=false",
              "-o", "loss.bce_replace=diceloss"]
    assert main(["train", "--dry-run", *opts, *p_only, "-o", "loss.gap_weight=0.1"]) == 2
    err = capsys.readouterr().err
    assert "loss.gap_weight is 0.1" in err and "no thresh_mask" in err and "BorderMap" in err
    assert "Traceback" not in err
    assert main(["train", "--dry-run", *opts, *p_only, "-o", "loss.gap_weight=0"]) == 0


def test_user_config_dry_run_prints_mindocr_banner(synth_root, tmp_path, capsys, monkeypatch):
    """The user's MindOCR file as is (data path and offline weights overridden): MindOCR's parameter count."""
    monkeypatch.chdir(tmp_path)
    args = ["train", "-c", USER_CFG, "--dry-run", "-o", f"train.dataset.dataset_root={synth_root}",
            "-o", f"eval.dataset.dataset_root={synth_root}", "-o", "model.backbone.pretrained=false"]
    assert run_cli(*args) == 0
    out = capsys.readouterr().out
    assert "Total number of trainable parameters: 25409730" in out
    assert "Optimizer: SGD" in out and "Global batch size: 1 x 1 x 1 = 1" in out and "AMP level: O0" in out
    assert "dry run: config, data and model are valid" in out
    assert not os.path.exists(tmp_path / "tmp_det" / "train_resume.ckpt")


def test_builtin_data_is_its_own_startup_stage(tmp_path, capsys, monkeypatch):
    """No -c: the first run generates the built-in data (held-out split included) as a named stage."""
    import textdet.commands.recipe

    monkeypatch.setenv("TEXTDET_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(textdet.commands.recipe, "SYNTH_SETTINGS",
                        {"n_train": 2, "n_val": 1, "seed": 0, "size": (64, 64), "n_heldout": 1})
    opts = ["-o", f"train.ckpt_save_dir={tmp_path / 'run'}", "-o", "model.backbone.width=8",
            "-o", "train.loader.batch_size=2"]
    assert main(["train", "--dry-run", *opts]) == 0
    first = capsys.readouterr().out
    assert main(["train", "--dry-run", *opts]) == 0
    second = capsys.readouterr().out
    assert "built-in data (generated, once)" in first and "built-in data (cached)" in second
    assert os.path.isfile(os.path.join(textdet.commands.recipe.builtin_data_root(), "heldout", "images", "img_1.jpg"))


def test_own_data_roots_skip_the_builtin_data(synth_root, tmp_path, capsys, monkeypatch):
    """No -c but both data roots given (the README tutorial): nothing is generated, the run uses those roots."""
    monkeypatch.setenv("TEXTDET_HOME", str(tmp_path / "home"))
    opts = [a for o in tiny_overrides(synth_root, str(tmp_path / "run")) for a in ("-o", o)]
    assert main(["train", "--dry-run", *opts]) == 0
    out = capsys.readouterr().out
    assert "built-in data" not in out and f"Data root: {synth_root}" in out
    assert not os.path.exists(tmp_path / "home")


def test_freeze_bn_keeps_running_statistics(synth_root, tmp_path):
    """train.freeze_bn: every BatchNorm keeps the statistics it started with (a fresh init: mean 0, var 1, no
    batches tracked) while the convolutions learn; without it the first epoch moves them."""
    stats = {}
    for frozen in (True, False):
        run = str(tmp_path / f"frozen_{frozen}")
        opts = tiny_overrides(synth_root, run, **{"train.freeze_bn": frozen, "scheduler.num_epochs": 1})
        assert run_cli(*cli_args("train", opts, "--no-progress")) == 0
        stats[frozen] = torch.load(os.path.join(run, "train_resume.ckpt"), weights_only=False)["model"]
    frozen, moving = stats[True], stats[False]
    means = [k for k in frozen if k.endswith("running_mean")]
    assert means
    for key in means:
        assert torch.equal(frozen[key], torch.zeros_like(frozen[key])), key
        var_key = key.replace("running_mean", "running_var")
        assert torch.equal(frozen[var_key], torch.ones_like(frozen[var_key])), var_key
        assert int(frozen[key.replace("running_mean", "num_batches_tracked")]) == 0
    assert any(not torch.equal(moving[key], frozen[key]) for key in means)
    initial = _trainer({"train.freeze_bn": True}, synth_root, str(tmp_path / "initial")).model.state_dict()
    assert torch.equal(initial["head.segm.1.running_var"], frozen["head.segm.1.running_var"])
    assert not torch.equal(initial["head.segm.0.weight"], frozen["head.segm.0.weight"])


def test_freeze_backbone_leaves_it_as_built(synth_root, tmp_path):
    """train.freeze: [backbone]: after an epoch the backbone's tensors (weights and BatchNorm statistics) are
    those it was built with, while the neck learned; an unknown part is a config error naming the parts."""
    run = str(tmp_path / "frozen")
    overrides = {"train.freeze": "[backbone]", "scheduler.num_epochs": 1}
    initial = _trainer(overrides, synth_root, str(tmp_path / "initial")).model.state_dict()
    assert run_cli(*cli_args("train", tiny_overrides(synth_root, run, **overrides), "--no-progress")) == 0
    trained = torch.load(os.path.join(run, "train_resume.ckpt"), weights_only=False)["model"]
    backbone = [k for k in initial if k.startswith("backbone.")]
    assert backbone and all(torch.equal(initial[k], trained[k]) for k in backbone)
    assert not torch.equal(initial["neck.out.0.weight"], trained["neck.out.0.weight"])
    no_trunk = r"train.freeze: 'trunk': the model has no part 'trunk'; its parts: backbone, neck"
    with pytest.raises(ConfigError, match=no_trunk):
        _trainer({"train.freeze": "[trunk]"}, synth_root, str(tmp_path / "bad"))
