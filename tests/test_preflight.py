"""Distributed pre-flight and the hang watchdog, with 2 gloo processes on the CPU started as a launcher does
(RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT set per process); faults come from tests/dist_driver.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import RECIPE, tiny_overrides
from textdet.watch import preflight
from textdet.watch.preflight import Claim, Launch
from textdet.watch.watchdog import EXIT_HANG, EXIT_PEER_FAILED, Watchdog, hang_summary

DRIVER = os.path.join(os.path.dirname(__file__), "dist_driver.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_two(fault: str, root: str, run: str, port: int | None = None, extra: tuple = (), **overrides):
    """Start ranks 0 and 1 of a 2-process job on this machine; returns ([(exit code, output)], seconds)."""
    opts = tiny_overrides(root, run, **{"system.distribute": True, "scheduler.num_epochs": 1, **overrides})
    args = ["-c", RECIPE, "--no-progress", *[a for o in opts for a in ("-o", o)], *extra]
    port = port or _free_port()
    procs = []
    start = time.monotonic()
    for rank in range(2):
        env = {**os.environ, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
        procs.append(subprocess.Popen([sys.executable, DRIVER, fault, *args], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    results = [(p.wait(timeout=240), p.stdout.read()) for p in procs]
    return results, time.monotonic() - start


def pre_flight_seconds(output: str) -> float:
    """Seconds from the start of the pre-flight (after imports) to its verdict, as the error reports them."""
    return float(output.split("pre-flight failed in ")[1].split(" s")[0])


@pytest.mark.parametrize(("fault", "extra", "cause"), [
    ("devices=1", (), "2 processes were started on this node but only 1 cuda device(s) are visible"),
    ("devices=2", ("--device", "cuda:0"), "ranks [0, 1] all run on cuda device 0: one device per process"),
    ("no-backend", (), "the gloo collective backend, which training on cpu devices under torchrun uses, is not"),
])
def test_preflight_fails_fast_on_every_rank_naming_the_cause(synth_root, tmp_path, fault, extra, cause):
    results, _ = launch_two(fault, synth_root, str(tmp_path / "run"), extra=extra)
    for code, output in results:
        assert code == 2, output[-2000:]
        assert "distributed pre-flight failed" in output and cause in output, output[-2000:]
        assert pre_flight_seconds(output) < 10


def test_preflight_names_a_master_port_in_use(synth_root, tmp_path):
    with socket.socket() as busy:
        busy.bind(("", 0))
        busy.listen()
        port = busy.getsockname()[1]
        results, _ = launch_two("none", synth_root, str(tmp_path / "run"), port=port)
    for code, output in results:
        assert code == 2 and f"MASTER_PORT={port} is already in use on this machine" in output, output[-2000:]
        assert pre_flight_seconds(output) < 10


@pytest.mark.slow
def test_watchdog_stops_a_hang_naming_the_slow_rank(synth_root, tmp_path):
    """Rank 1 sleeps inside its 3rd step; rank 0 waits for it in DDP's forward (the buffer broadcast). With
    train.step_timeout 4 s both print their stack and stop; the summary names rank 1."""
    results, seconds = launch_two("sleep=1:3", synth_root, str(tmp_path / "run"), **{"train.step_timeout": 4})
    for code, output in results:
        assert code == EXIT_HANG, output[-3000:]
        assert "no training step finished for 4 s (train.step_timeout)" in output
        assert "Python stack of the main thread:" in output and 'in train_step' in output
    assert "slow rank(s): 1 (in data wait" in results[0][1]
    assert "time.sleep(600)" in results[1][1]  # rank 1's stack shows where it is stuck
    assert seconds < 60


@pytest.mark.slow
def test_a_failed_rank_stops_the_others_with_its_last_lines(synth_root, tmp_path):
    results, seconds = launch_two("raise=1:3", synth_root, str(tmp_path / "run"))
    (code0, out0), (code1, out1) = results
    assert code0 == EXIT_PEER_FAILED, out0[-3000:]
    assert "rank 1 failed: RuntimeError: injected failure in step 3 (at dist_driver.py:" in out0
    assert "its last log lines:" in out0 and "epoch: [1/1] step: [2/3]" in out0.split("its last log lines:")[1]
    assert code1 == 1 and "RuntimeError: injected failure in step 3" in out1
    assert "frame #" not in out0 + out1  # no C++ stack dumps from the store
    assert seconds < 60


def test_ascend_910_pairs_stay_within_a_group_of_four():
    assert preflight.pairing_problems("npu", "Ascend910A", ["0", "1"]) == []
    assert preflight.pairing_problems("npu", "Ascend910A", ["4", "5", "6", "7"]) == []
    assert preflight.pairing_problems("npu", "Ascend910A", list("01234567")) == []
    (problem,) = preflight.pairing_problems("npu", "Ascend910A", ["3", "4"])
    assert problem.startswith("Ascend910A devices [3, 4]: HCCL on Ascend 910 links 1, 2, 4 or 8 devices")
    assert len(preflight.pairing_problems("npu", "Ascend910A", ["0", "1", "2"])) == 1  # 3 devices
    assert preflight.pairing_problems("npu", "Ascend910B3", ["3", "4"]) == []  # 910B: any pair
    assert preflight.pairing_problems("cuda", "NVIDIA H100", ["3", "4"]) == []


def test_socket_interface_variables_must_name_an_interface():
    names = [name for _, name in socket.if_nameindex()]
    assert preflight.env_problems({"NCCL_SOCKET_IFNAME": names[0][:2]}) == []  # a prefix, as NCCL reads it
    assert preflight.env_problems({"GLOO_SOCKET_IFNAME": "^docker"}) == []  # an exclusion
    (problem,) = preflight.env_problems({"NCCL_SOCKET_IFNAME": "ib7x"})
    assert problem.startswith("NCCL_SOCKET_IFNAME=ib7x names no network interface of this machine")


def test_multi_node_with_a_loopback_master_is_refused():
    launch = Launch(rank=3, local_rank=1, world_size=4, local_world_size=2, master_addr="127.0.0.1",
                    master_port=29500, agent_store=True)
    (problem,) = preflight.network_problems(launch)
    assert "the other nodes cannot reach a loopback address" in problem


def test_a_device_held_outside_the_job_is_named():
    claims = [Claim(0, 0, 100, "cuda:0", "0", None, [], 0.0), Claim(1, 1, 101, "cuda:1", "1", "pid 55 (python x)", [],
                                                                    0.0)]
    (problem,) = preflight.shared_device_problems("cuda", claims)
    assert problem.startswith("cuda device 1 (rank 1) is held by pid 55 (python x), a process outside this job")


def test_hang_summary_names_the_rank_behind():
    """Rank 2 finished fewer steps; ranks 0 and 1 are in backward (the all-reduce waits for rank 2)."""
    states = {0: {"steps": 7, "phase": "backward", "phase_s": 30.0}, 1: {"steps": 7, "phase": "backward",
              "phase_s": 30.0}, 2: {"steps": 6, "phase": "optimizer", "phase_s": 31.0}}
    assert "slow rank(s): 2 (in optimizer" in hang_summary(states, 30)
    same = {0: states[0], 1: states[1]}
    assert "every rank is in backward: a collective that never completes" in hang_summary(same, 30)


def test_doctor_distributed_names_a_busy_port_and_a_missing_interface(monkeypatch, capsys):
    from textdet.cli import main

    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "ib9x")
    with socket.socket() as busy:
        busy.bind(("", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = main(["doctor", "--distributed", "--nproc", "2", "--device", "cpu", "--master-port", str(port)])
    out = capsys.readouterr().out
    assert code == 1
    assert f"master        PROBLEM\n  MASTER_PORT={port} is already in use" in out
    assert "environment   PROBLEM\n  GLOO_SOCKET_IFNAME=ib9x names no network interface" in out
    assert "devices       ok" in out and "doctor: 2 problem(s) to fix before torchrun" in out


def test_watchdog_stop_waits_for_a_poll_in_flight(monkeypatch):
    """stop() returns only after the poll that is running ends, so that the process never tears the store's
    client down under it (a rank once aborted at exit with "terminate called without an active exception")."""
    inside, finished = threading.Event(), threading.Event()

    def slow_check(self) -> None:
        inside.set()
        time.sleep(0.3)
        finished.set()

    monkeypatch.setattr(Watchdog, "_check", slow_check)
    dog = Watchdog("auto", rank=0, world_size=1, phases=None, poll_s=0.01)
    assert inside.wait(5)
    dog.stop()
    assert finished.is_set() and not dog.thread.is_alive()
