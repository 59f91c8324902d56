"""The output lock: a stale lock is taken over by exactly one of several racing runs, and liveness
is the heartbeat's age plus pid, process start time and boot (datapipe.engine.lock)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from datapipe.engine import lock as output_lock
from datapipe.engine.lock import LOCK_NAME, OutputLock, OutputLockedError, is_stale, read_lock

REPO = Path(__file__).resolve().parent.parent

# A run that finds the lock stale and, before acting on it, loses the CPU for 0.3 s (a loaded host):
# the window in which a second run used to remove the first one's fresh lock and write its own.
RACER = r"""
import json, os, sys, time
from pathlib import Path
from datapipe.engine import lock as output_lock
slow = output_lock.is_stale
def is_stale(holder, now=None):
    verdict = slow(holder, now)
    time.sleep(0.3)
    return verdict
output_lock.is_stale = is_stale
out, ready, n = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
(ready / str(os.getpid())).touch()
while len(list(ready.iterdir())) < n:   # start together, once every racer has imported datapipe
    time.sleep(0.01)
try:
    lock = output_lock.OutputLock(out).acquire()
except output_lock.OutputLockedError:
    print("refused"); sys.exit(0)
print("took", lock.token, flush=True)
time.sleep(3)   # hold it while the others look
"""


def _stale_record() -> dict:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    return {"host": socket.gethostname(), "pid": dead.pid, "since": time.time() - 60,
            "heartbeat": time.time() - 60, "token": "stale"}


@pytest.mark.parametrize("trial", range(2))
def test_racing_takeovers_of_a_stale_lock_leave_one_holder(tmp_path, trial):
    out, ready = tmp_path / "out", tmp_path / "ready"
    out.mkdir()
    ready.mkdir()
    (out / LOCK_NAME).write_text(json.dumps(_stale_record()))
    procs = [subprocess.Popen([sys.executable, "-c", RACER, str(out), str(ready), "4"], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-500:] for _, e in outs]
    took = [o.split()[1] for o, _ in outs if o.startswith("took")]
    assert len(took) == 1, [o for o, _ in outs]
    assert [o.strip() for o, _ in outs].count("refused") == 3


def test_pid_1_with_a_year_old_heartbeat_is_stale(tmp_path):
    year_ago = time.time() - 365 * 86400
    rec = {"host": socket.gethostname(), "pid": 1, "since": year_ago, "heartbeat": year_ago, "token": "x"}
    (tmp_path / LOCK_NAME).write_text(json.dumps(rec))
    assert is_stale(rec)
    with OutputLock(str(tmp_path)):
        assert read_lock(str(tmp_path))["pid"] == os.getpid()


def test_a_zombie_holder_is_stale(tmp_path):
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.time() + 20
        while psutil.Process(zombie.pid).status() != psutil.STATUS_ZOMBIE:  # exited, not yet reaped
            assert time.time() < deadline
            time.sleep(0.05)
        rec = {"host": socket.gethostname(), "pid": zombie.pid, "since": time.time(),
               "heartbeat": time.time(), "token": "z"}
        (tmp_path / LOCK_NAME).write_text(json.dumps(rec))
        with OutputLock(str(tmp_path)):
            assert read_lock(str(tmp_path))["token"] != "z"
    finally:
        zombie.wait()


def test_a_reused_pid_is_stale_and_a_live_holder_is_not(tmp_path):
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = psutil.Process(live.pid).create_time()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        rec = {"host": socket.gethostname(), "pid": live.pid, "started": started, "boot": boot,
               "since": time.time(), "heartbeat": time.time(), "token": "live"}
        (tmp_path / LOCK_NAME).write_text(json.dumps(rec))
        with pytest.raises(OutputLockedError, match=f"in use by pid {live.pid} "):
            OutputLock(str(tmp_path)).acquire()
        # same pid, but the recorded process started an hour earlier: the pid now names another process
        (tmp_path / LOCK_NAME).write_text(json.dumps({**rec, "started": started - 3600}))
        assert is_stale(read_lock(str(tmp_path)))
        # a record of another boot of this machine (pids restart from 1 at boot)
        assert is_stale({**rec, "boot": "another-boot"})
        with OutputLock(str(tmp_path)):
            assert read_lock(str(tmp_path))["pid"] == os.getpid()
    finally:
        live.kill()
        live.wait()


def test_the_record_names_start_time_and_boot(tmp_path):
    with OutputLock(str(tmp_path)):
        rec = read_lock(str(tmp_path))
        assert abs(rec["started"] - psutil.Process().create_time()) < 0.05
        assert rec["boot"] == output_lock._boot_id() and not is_stale(rec)
        assert is_stale(rec, now=rec["heartbeat"] + output_lock.STALE_S + 1)  # a hung holder, too
