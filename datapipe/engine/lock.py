"""One run at a time per output location: a lock file that names its holder.

``OUTPUT/.datapipe.lock`` holds ``{host, pid, since, heartbeat, token}``. On a local or shared
POSIX file system it is created with ``O_CREAT|O_EXCL`` (atomic, NFSv3+ included); on an object
store it is a lease object: written if absent, then read back to check that this run's token won.
The holder refreshes ``heartbeat`` every ``HEARTBEAT_S`` seconds. A lock is stale, and taken over
with a warning, when its process is gone (same host, pid not alive) or its heartbeat is older
than ``STALE_S`` (another host: a crashed machine cannot clean up).
"""
from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from datetime import datetime, timezone

from datapipe.io.parquet import fs_and_path, join

log = logging.getLogger("datapipe")
LOCK_NAME = ".datapipe.lock"
HEARTBEAT_S = 30.0
STALE_S = 600.0


class OutputLockedError(RuntimeError):
    """Another live run holds the output location (the message names its pid, host and start time)."""


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


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
    now = time.time() if now is None else now
    if holder.get("host") == socket.gethostname() and isinstance(holder.get("pid"), int) and holder["pid"] > 0:
        return not _pid_alive(holder["pid"])
    return now - float(holder.get("heartbeat") or 0) > STALE_S


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
        return {"host": socket.gethostname(), "pid": os.getpid(), "since": self.since,
                "heartbeat": time.time(), "token": self.token}

    def _local(self) -> bool:
        proto = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        return proto in ("file", "local")

    def _try_create(self) -> bool:
        self.fs.makedirs(self.path.rsplit("/", 1)[0], exist_ok=True)
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
        return bool(got) and got.get("token") == self.token

    def acquire(self) -> "OutputLock":
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
