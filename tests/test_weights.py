"""Weights coming in: downloads (loopback server), MindSpore .ckpt reading and mapping, safe unpickling.

``fixtures/mindocr_tiny_dbnetpp.ckpt`` was written by MindSpore itself
(benchmarks/parity/mindocr/make_mindspore_fixture.py): MindOCR's DBNet++ layout (mindcv ResNet cells at width 2,
one block per stage; MindOCR's DBFPN with ASF and DBHead at 16 channels) plus a Momentum optimizer's entries.
``mindocr_tiny_dbnetpp_io.npz`` holds an input and MindSpore's outputs for it, stage by stage.
"""

from __future__ import annotations

import hashlib
import os
import random
import socket
import subprocess
import sys
import threading
import tracemalloc
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import torch

from textdet.cli import main
from textdet.errors import ConfigError
from textdet.hub import download
from textdet.models import DBFPN, DBHead, DBNet, DetResNet, det_resnet18, load_model_weights, read_state_dict
from textdet.models.ms_ckpt import MsCheckpointError, mindspore_to_torch_names, read_ms_checkpoint
from textdet.models.resnet import BasicBlock
from textdet.runtime.checkpoint import load_checkpoint

FIXTURES = Path(__file__).parent / "fixtures"
CKPT = FIXTURES / "mindocr_tiny_dbnetpp.ckpt"


def tiny_dbnetpp() -> DBNet:
    """textdet's side of the fixture: the same network from our modules."""
    return DBNet(DetResNet(BasicBlock, (1, 1, 1, 1), width=2), DBFPN([2, 4, 8, 16], 16, use_asf=True), DBHead(16))


# ----------------------------------------------------------------------------- MindSpore checkpoints
def test_mindspore_checkpoint_gives_mindspore_outputs_stage_by_stage():
    model = tiny_dbnetpp().eval()
    report = load_model_weights(model, CKPT)
    assert (report.missing, report.unexpected, report.mismatched) == ([], [], [])
    io = np.load(FIXTURES / "mindocr_tiny_dbnetpp_io.npz")
    with torch.no_grad():
        levels = model.backbone(torch.from_numpy(io["image"]))
        neck = model.neck(levels)
        binary = model.head(neck)["binary"]
    for i, level in enumerate(levels):  # the "same" max-pool puts its padding bottom/right, as MindSpore
        assert np.abs(level.numpy() - io[f"level{i}"]).max() < 1e-5, f"backbone level {i}"
    assert np.abs(neck.numpy() - io["neck"]).max() < 1e-5
    assert np.abs(binary.numpy() - io["binary"]).max() < 1e-5


def test_mindspore_names_map_to_ours_and_optimizer_entries_are_left_out():
    tensors, skipped = read_ms_checkpoint(CKPT)
    weights, training = mindspore_to_torch_names(tensors)
    assert skipped == []
    assert {"global_step", "learning_rate", "momentum", "moments.head.segm.0.weight"} <= set(training)
    assert len(training) == 3 + 18  # the optimizer covered the head's 18 trainable tensors
    assert tensors["global_step"].dtype == torch.int32
    for ours, theirs in (("backbone.layer2.0.downsample.0.weight", "backbone.layer2.0.down_sample.0.weight"),
                         ("head.segm.1.running_var", "head.segm.1.moving_variance"),
                         ("head.segm.1.weight", "head.segm.1.gamma"), ("neck.asf.conv.bias", "neck.fuse.conv.bias")):
        assert torch.equal(weights[ours], tensors[theirs])


def test_convert_mindocr_writes_a_textdet_checkpoint(tmp_path, capsys):
    out = tmp_path / "converted.ckpt"
    assert main(["convert", "mindocr", str(CKPT), "--out", str(out)]) == 0
    assert "left out 21 optimizer/training entries" in capsys.readouterr().out
    model = tiny_dbnetpp()
    missing, unexpected = model.load_state_dict(read_state_dict(out), strict=False)
    assert unexpected == [] and all(k.endswith("num_batches_tracked") for k in missing)


def test_convert_mindocr_with_a_config_names_shape_mismatches(tmp_path, capsys):
    cfg = Path(__file__).parent / "../configs/dbpp_r50_icdar15.yaml"
    assert main(["convert", "mindocr", str(CKPT), "--out", str(tmp_path / "x.ckpt"), "-c", str(cfg)]) != 0
    err = capsys.readouterr().err
    assert "shape mismatch (dropped): backbone.conv1.weight: file (2, 3, 7, 7), model (64, 3, 7, 7)" in err
    assert not (tmp_path / "x.ckpt").exists()


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def test_malformed_checkpoints_fail_fast_without_allocating_the_declared_size(tmp_path):
    good = CKPT.read_bytes()
    tensor = b"\x12\x07Float32" + b"\x1a" + _varint(1 << 40) + b"\0" * 16  # tensor_content declares 1 TiB
    value = b"\x0a\x01w" + b"\x12" + _varint(len(tensor)) + tensor
    cases = {"truncated": good[: len(good) // 3], "cut_last_byte": good[:-1], "garbage": b"\x0a" + b"\xff" * 9 + b"x",
             "huge_length": b"\x0a" + _varint(len(value)) + value,
             "not_a_tensor_type": good.replace(b"Float32", b"Floot32")}
    tracemalloc.start()
    for name, data in cases.items():
        path = tmp_path / f"{name}.ckpt"
        path.write_bytes(data)
        with pytest.raises(MsCheckpointError, match=str(path)):
            read_ms_checkpoint(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20 * len(good)


def test_fuzzed_checkpoints_raise_only_clear_errors_in_bounded_memory(tmp_path):
    """300 mutated copies of the fixture and 50 random files: parsed, or refused with MsCheckpointError."""
    good = CKPT.read_bytes()
    rng = random.Random(0)
    path = tmp_path / "fuzz.ckpt"
    refused = 0
    tracemalloc.start()
    for i in range(350):
        if i >= 300:
            data = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 2000)))
        else:
            data = bytearray(good)
            for _ in range(rng.randrange(1, 9)):
                data[rng.randrange(len(data))] = rng.getrandbits(8)
            if rng.random() < 0.3:
                data = data[: rng.randrange(len(data))]
        path.write_bytes(bytes(data))
        try:
            tensors, _ = read_ms_checkpoint(path)
            assert all(isinstance(t, torch.Tensor) for t in tensors.values())
        except MsCheckpointError:
            refused += 1
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert 50 <= refused < 350  # both outcomes happen
    assert peak < 20 * len(good)


# ----------------------------------------------------------------------------- weights_only
class _Payload:
    def __reduce__(self):
        return (os.getcwd, ())


def test_pickles_that_need_code_are_refused_with_an_explanation(tmp_path):
    path = tmp_path / "evil.ckpt"
    torch.save({"model": det_resnet18(width=2).state_dict(), "extra": _Payload()}, path)
    with pytest.raises(ConfigError, match="weights_only=True"):
        read_state_dict(path, "eval.ckpt_load_path")
    with pytest.raises(ConfigError, match="re-save only its state_dict"):
        load_checkpoint(str(path), "model.resume")


def test_resume_checkpoints_with_numpy_rng_state_load_safely(tmp_path):
    path = tmp_path / "resume.ckpt"
    torch.save({"rng": {"numpy": np.random.get_state()}, "model": {}}, path)
    assert load_checkpoint(str(path), "model.resume")["rng"]["numpy"][0] == "MT19937"


# ----------------------------------------------------------------------------- downloads
class _Server:
    """Loopback HTTP server: path -> (status, body, declared length)."""

    def __init__(self, routes: dict[str, tuple[int, bytes, int | None]]):
        self.hits: list[str] = []
        server_self = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                server_self.hits.append(self.path)
                status, body, length = routes.get(self.path, (404, b"not found", None))
                self.send_response(status)
                self.send_header("Content-Length", str(length if length is not None else len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def online(monkeypatch):
    monkeypatch.delenv("TEXTDET_OFFLINE", raising=False)


def _named(body: bytes, stem: str = "w") -> str:
    return f"/{stem}-{hashlib.sha256(body).hexdigest()[:8]}.pth"


def test_download_checks_the_hash_prefix_and_caches(tmp_path, online):
    body = os.urandom(5000)
    server = _Server({_named(body): (200, body, None), "/w-deadbeef.pth": (200, body, None),
                      "/cut.pth": (200, body[:100], 5000)})
    try:
        path = download(server.url + _named(body), "test", "ESCAPE", folder=tmp_path, progress=False)
        assert path.read_bytes() == body and path.parent == tmp_path
        assert download(server.url + _named(body), "test", "ESCAPE", folder=tmp_path) == path
        assert len(server.hits) == 1  # the second call used the cache
        with pytest.raises(ConfigError, match="does not match the sha256 prefix in its name .deadbeef"):
            download(server.url + "/w-deadbeef.pth", "test", "ESCAPE", folder=tmp_path, progress=False)
        with pytest.raises(ConfigError, match="cut.pth"):
            download(server.url + "/cut.pth", "test", "ESCAPE", folder=tmp_path, progress=False)
        with pytest.raises(ConfigError) as info:
            download(server.url + "/missing-0123abcd.pth", "model.pretrained", "-o model.pretrained=false",
                     folder=tmp_path, progress=False)
    finally:
        server.close()
    assert sorted(os.listdir(tmp_path)) == [path.name]  # refused and partial files are gone
    for text in ("404", "missing-0123abcd.pth", str(tmp_path), "curl -L", "-o model.pretrained=false"):
        assert text in str(info.value)


def test_a_server_that_never_answers_times_out(tmp_path, online):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # the kernel accepts the connection; nobody ever answers
    try:
        with pytest.raises(ConfigError, match="timed out"):
            download(f"http://127.0.0.1:{silent.getsockname()[1]}/w.pth", "test", "ESCAPE", folder=tmp_path,
                     timeout=0.5, progress=False)
    finally:
        silent.close()
    assert os.listdir(tmp_path) == []


def test_offline_and_non_zero_local_ranks_never_download(tmp_path, monkeypatch):
    server = _Server({})
    try:
        with pytest.raises(ConfigError, match="TEXTDET_OFFLINE is set"):
            download(server.url + "/a.pth", "test", "ESCAPE", folder=tmp_path)
        monkeypatch.delenv("TEXTDET_OFFLINE")
        monkeypatch.setenv("LOCAL_RANK", "1")
        threading.Timer(0.3, lambda: (tmp_path / "b.pth").write_bytes(b"rank 0 wrote me")).start()
        assert download(server.url + "/b.pth", "test", "ESCAPE", folder=tmp_path).read_bytes() == b"rank 0 wrote me"
    finally:
        server.close()
    assert server.hits == []


def test_urls_in_backbone_and_model_pretrained_are_downloaded(tmp_path, online, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    torch.manual_seed(3)
    source = det_resnet18(width=4)
    buf = tmp_path / "src.pth"
    torch.save(source.state_dict(), buf)
    server = _Server({"/r18.pth": (200, buf.read_bytes(), None), "/dbpp.ckpt": (200, CKPT.read_bytes(), None)})
    try:
        loaded = det_resnet18(pretrained=server.url + "/r18.pth", width=4)
        model = tiny_dbnetpp()
        report = load_model_weights(model, server.url + "/dbpp.ckpt")
    finally:
        server.close()
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in source.state_dict().items())
    assert (tmp_path / "torch" / "hub" / "checkpoints" / "r18.pth").is_file()
    assert report.mismatched == [] and report.unexpected == [] and len(report.loaded) == 101


def test_model_pretrained_true_downloads_the_mindocr_zoo_file_of_that_network(tmp_path, online, monkeypatch):
    """``model.pretrained: true`` on a spelled-out network equal to a preset (the backbone's own ``pretrained``
    aside) loads that preset's model-zoo file; a network that is no preset is refused with the way out."""
    from textdet.build import parts, sections
    from textdet.config import load_config

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    net = ["model.backbone={name: det_resnet18, width: 4}", "model.neck={name: DBFPN, out_channels: 16}",
           "model.head={name: DBHead}"]
    torch.manual_seed(5)
    source = parts.build_model_from_config(load_config(None, net))
    saved = tmp_path / "src.pth"
    torch.save(source.state_dict(), saved)
    body = saved.read_bytes()
    server = _Server({_named(body, "tiny"): (200, body, None)})
    preset = {"backbone": {"name": "det_resnet18", "width": 4, "pretrained": True},
              "neck": {"name": "DBFPN", "out_channels": 16}, "head": {"name": "DBHead"}}
    monkeypatch.setitem(sections.MODEL_PRESETS, "tiny", preset)
    monkeypatch.setitem(parts.MINDOCR_ZOO, "tiny", server.url + _named(body, "tiny"))
    try:
        loaded = parts.build_model_from_config(load_config(None, [*net, "model.pretrained=true"]))
    finally:
        server.close()
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in source.state_dict().items())
    with pytest.raises(ConfigError, match="none of MindOCR's model-zoo models .*or false"):
        parts.build_model_from_config(load_config(None, [*net[:2], "model.head={name: DBHead, k: 10}",
                                                         "model.pretrained=true"]))


def test_a_date_suffix_is_not_a_hash(tmp_path, online):
    """torchvision's ``-<hex>.ext`` rule took dbnet-20240101.ckpt's date for a sha256 prefix and refused the file."""
    body = b"weights"
    server = _Server({"/dbnet-20240101.ckpt": (200, body, None)})
    try:
        path = download(server.url + "/dbnet-20240101.ckpt", "model.pretrained", "ESCAPE", folder=tmp_path,
                        progress=False)
    finally:
        server.close()
    assert path.read_bytes() == body


def test_waiting_ranks_stop_within_seconds_with_rank_0s_reason(tmp_path, online):
    """Two processes with one parent, as torchrun starts them: local rank 0's download fails (404), local rank 1
    stops waiting at once and says why, instead of polling for an hour."""
    server = _Server({})
    script = ("import os, sys, time; from textdet.hub import download; start = time.monotonic()\n"
              "try:\n    download(sys.argv[1], 'model.pretrained', 'ESCAPE', folder=sys.argv[2], progress=False)\n"
              "except Exception as e:\n    print(f'{time.monotonic() - start:.2f}', e)\n")
    procs = []
    try:
        for rank in ("1", "0"):  # the waiting rank starts first
            env = {**os.environ, "LOCAL_RANK": rank, "PYTHONPATH": os.pathsep.join(sys.path)}
            procs.append(subprocess.Popen([sys.executable, "-c", script, server.url + "/gone.pth", str(tmp_path)],
                                          env=env, stdout=subprocess.PIPE, text=True))
        waiting, downloading = (p.communicate(timeout=60)[0] for p in procs)
    finally:
        server.close()
        for p in procs:
            p.kill()  # a rank still waiting (the bug this test is about) must not outlive the test
    assert "cannot download" in downloading and "404" in downloading
    seconds, message = waiting.split(" ", 1)
    assert "local rank 0 could not download gone.pth" in message and "404" in message
    assert float(seconds) < 15  # the import of the other process included; the poll itself is 0.5 s


def _state_of(width: int) -> dict:
    torch.manual_seed(0)
    return DBNet(DetResNet(BasicBlock, (1, 1, 1, 1), width=width), DBFPN([width * k for k in (1, 2, 4, 8)], 16),
                 DBHead(16)).state_dict()


def test_pretrained_weights_of_another_network_are_refused(tmp_path, caplog):
    """A file of a width-4 network for a width-2 one: only the neck's output side and the head fit (under half),
    refused with the counts and a few names. The same network less its head: a WARNING with the counts."""
    from textdet.models.weights import check_coverage

    model = DBNet(DetResNet(BasicBlock, (1, 1, 1, 1), width=2), DBFPN([2, 4, 8, 16], 16), DBHead(16))
    total = len([k for k in model.state_dict() if not k.endswith("num_batches_tracked")])
    wrong = tmp_path / "wrong.pth"
    torch.save(_state_of(4), wrong)
    report = load_model_weights(model, wrong)
    with pytest.raises(ConfigError) as info:
        check_coverage(report, model)
    loaded = len([k for k in report.loaded if not k.endswith("num_batches_tracked")])
    assert 0 < 2 * loaded < total
    for text in (f"only {loaded} of the model's {total} tensors", "shape mismatches", "backbone.", "model.pretrained"):
        assert text in str(info.value)
    partial = tmp_path / "partial.pth"
    torch.save({k: v for k, v in _state_of(2).items() if not k.startswith("head.")}, partial)
    heads = len([k for k in model.state_dict() if k.startswith("head.") and not k.endswith("num_batches_tracked")])
    with caplog.at_level("WARNING"):
        check_coverage(load_model_weights(model, partial), model)
    assert f"partial load, {total - heads} of the model's {total} tensors" in caplog.text
