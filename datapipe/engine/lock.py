"""One run at a time per output location: a lock file that names its holder.

``OUTPUT/.datapipe.lock`` holds ``{host, pid, started, boot, since, heartbeat, token}``. On a local
or shared POSIX file system the whole look-and-take step (create with ``O_CREAT|O_EXCL``; or read
the holder, judge it stale, remove it and create ours) runs under an exclusive ``flock`` on the
output folder, so two runs that find the same stale lock cannot both take it over (without it
both removed and recreated it, 2 of 15 trials). On an object store it is a
lease object: written if absent, then read back to check that this run's token won; a stale one is
removed only if it still holds the token judged stale (no store-wide atomic step exists there).

The holder refreshes ``heartbeat`` every ``HEARTBEAT_S`` seconds. A lock is stale, and taken over
with a warning, when its heartbeat is older than ``STALE_S`` (``STALE_BEATS`` missed beats: a
crashed machine or a hung holder cannot clean up), or, on the same host, when its process is gone:
no such pid, a zombie, a pid whose process started at another time than the recorded ``started``
(the pid was reused), or another boot of the machine.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from datetime import datetime, timezone

import psutil  # a dependency of dask.distributed

from datapipe.io.parquet import fs_and_path, join

log = logging.getLogger("datapipe")
LOCK_NAME = ".datapipe.lock"
HEARTBEAT_S = 30.0
STALE_BEATS = 20
STALE_S = STALE_BEATS * HEARTBEAT_S
#: Two readings of one process's start time differ by less (psutil derives it from boot time and ticks).
_START_TOLERANCE_S = 0.05


class OutputLockedError(RuntimeError):
    """Another live run holds the output location (the message names its pid, host and start time)."""


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _boot_id() -> str:
    """This boot of the machine: the kernel's boot id on Linux, else psutil's boot time."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            return fh.read().strip()
    except OSError:
        return f"{psutil.boot_time():.0f}"


def _started(pid: int) -> float | None:
    """Start time of process ``pid`` (seconds since the epoch), None when there is none."""
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError):
        return None


def _process_alive(holder: dict) -> bool:
    """True when the holder's process (same host) still runs: the pid exists, is no zombie, and,
    where the record has them, started at the recorded time in this boot."""
    pid = holder["pid"]
    if holder.get("boot") and holder["boot"] != _boot_id():
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        started = proc.create_time()
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # exists, owned by someone else, details hidden
        return True
    want = holder.get("started")
    return not isinstance(want, (int, float)) or abs(started - want) < _START_TOLERANCE_S


def read_lock(output: str, storage_options: dict | None = None) -> dict | None:
    """The current holder's record, or None when the output is not locked."""
    fs, path = fs_and_path(join(output, LOCK_NAME), storage_options)
    try:
        with fs.open(path, "r") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None
    except (ValueError, OSError):  # being written right now, or torn by a crash
        return {"host": "?", "pid": -1, "since": 0, "heartbeat": 0, "token": ""}


def is_stale(holder: dict, now: float | None = None) -> bool:
    """True when ``holder`` (a lock record) no longer holds the lock (module docstring)."""
    now = time.time() if now is None else now
    if now - float(holder.get("heartbeat") or 0) > STALE_S:
        return True
    if holder.get("host") == socket.gethostname() and isinstance(holder.get("pid"), int) and holder["pid"] > 0:
        return not _process_alive(holder)
    return False


def describe(output: str, holder: dict) -> str:
    return (f"{output} is in use by pid {holder.get('pid')} on {holder.get('host')} since "
            f"{_iso(float(holder.get('since') or 0))} (another datapipe run writes there; wait for it, or "
            f"choose another --output)")


class OutputLock:
    """Context manager: hold ``OUTPUT/.datapipe.lock`` for the duration of a run.

    Raises OutputLockedError when a live run holds it. ``storage_options`` as for the output URL.
    """

    def __init__(self, output: str, storage_options: dict | None = None):
        self.output, self.so = output, storage_options
        self.fs, self.path = fs_and_path(join(output, LOCK_NAME), storage_options)
        self.token = uuid.uuid4().hex
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.since = time.time()

    def _record(self) -> dict:
        return {"host": socket.gethostname(), "pid": os.getpid(), "started": _started(os.getpid()),
                "boot": _boot_id(), "since": self.since, "heartbeat": time.time(), "token": self.token}

    def _local(self) -> bool:
        proto = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        return proto in ("file", "local")

    def _try_create(self) -> bool:
        data = json.dumps(self._record())
        if self._local():
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "w") as fh:
                fh.write(data)
            return True
        if self.fs.exists(self.path):
            return False
        with self.fs.open(self.path, "w") as fh:
            fh.write(data)
        time.sleep(0.2)  # let a racing writer land, then see who won
        got = read_lock(self.output, self.so)
        return got is not None and got.get("token") == self.token

    @contextlib.contextmanager
    def _guard(self):
        """Exclusive flock on the output folder itself while looking and taking (local file systems;
        a folder, not a guard file: nothing is left in the output)."""
        if not self._local():
            yield
            return
        import fcntl

        fd = os.open(self.path.rsplit("/", 1)[0], os.O_RDONLY | os.O_DIRECTORY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError as e:  # e.g. an NFS mount emulating flock: O_EXCL still holds for creation
                log.debug("no flock on %s: %s", self.output, e)
            yield
        finally:
            os.close(fd)  # releases the flock

    def acquire(self) -> "OutputLock":
        self.fs.makedirs(self.path.rsplit("/", 1)[0], exist_ok=True)
        with self._guard():
            for _ in range(3):
                if self._try_create():
                    self._thread = threading.Thread(target=self._beat, name="datapipe-lock", daemon=True)
                    self._thread.start()
                    return self
                holder = read_lock(self.output, self.so)
                if holder is None:
                    continue  # released between our two looks
                if not is_stale(holder):
                    raise OutputLockedError(describe(self.output, holder))
                again = read_lock(self.output, self.so)  # an object store: remove only what was judged
                if again is None or again.get("token") != holder.get("token"):
                    continue
                log.warning("taking over a stale lock on %s (pid %s on %s since %s: no longer running)",
                            self.output, holder.get("pid"), holder.get("host"), _iso(float(holder.get("since") or 0)))
                try:
                    self.fs.rm(self.path)
                except FileNotFoundError:
                    pass
        raise OutputLockedError(f"{self.output}: could not take the lock {LOCK_NAME} (contended)")

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                holder = read_lock(self.output, self.so)
                if holder is not None and holder.get("token") not in (self.token, ""):  # "": torn read
                    log.error("the lock on %s was taken over by pid %s on %s: this run no longer holds it",
                              self.output, holder.get("pid"), holder.get("host"))
                    return
                tmp = f"{self.path}.hb-{self.token[:8]}"
                with self.fs.open(tmp, "w") as fh:
                    fh.write(json.dumps(self._record()))
                self.fs.mv(tmp, self.path)
            except Exception as e:  # noqa: BLE001 - a missed beat only ages the lease
                log.debug("lock heartbeat failed: %s", e)

    def release(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        holder = read_lock(self.output, self.so)
        if holder and holder.get("token") == self.token:
            try:
                self.fs.rm(self.path)
            except FileNotFoundError:
                pass

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
        return False
