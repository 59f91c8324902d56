"""Run resiliparse extraction in a child process, one document at a time, with a time limit.

Why: lexbor (under resiliparse) has crashed whole processes on some markup (case B15's
``<svg><template>``) and a pathological page can take minutes. A crash or overrun in the child
costs one document (errored ``extract:crash`` / ``extract:timeout``), never the Dask worker.
The child is a plain ``subprocess`` (Dask worker processes are daemonic and may not fork
``multiprocessing`` children). Messages are length-prefixed pickles over stdin/stdout.
"""
from __future__ import annotations

import fcntl
import json
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time

_LEN = struct.Struct("<Q")


def _write(fh, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    fh.write(_LEN.pack(len(data)))
    fh.write(data)  # not header + data: that copies every payload once more
    fh.flush()


#: Pipe capacity asked for (Linux's default is 64 KiB, the unprivileged maximum 1 MiB). A typical
#: HTML payload (100-300 KB) then crosses in one write instead of a ping-pong of 64 KiB chunks,
#: each a sleep and a wake-up of both processes: measured ~25% of extract's wall time on one
#: worker, and the part that grew most when 16 workers shared 16 cores.
PIPE_BYTES = 1 << 20


def _grow_pipe(fd: int) -> None:
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (AttributeError, OSError):  # not Linux, or over /proc/sys/fs/pipe-max-size: keep the default
        pass


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                return None
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return bytes(buf)


_LOCAL = threading.local()


def shared_sandbox(options: dict) -> Sandbox:
    """This thread's sandbox for ``options``, made on first use: every extract stage object with
    the same settings in one thread uses one child (``datapipe.stages.get("extract")`` called
    again and again started a child per object, 0.6-1.1 s each). Per thread, because one child
    serves one request at a time; a thread's children close when the thread ends."""
    pool = _LOCAL.__dict__.setdefault("pool", {})
    key = json.dumps(options, sort_keys=True, default=str)
    if key not in pool:
        pool[key] = Sandbox(options)
    return pool[key]


class Sandbox:
    """A persistent child that extracts documents; restarted after a crash or a timeout."""

    def __init__(self, options: dict):
        self.options = options
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        """Start the child if it is not running (also done lazily by ``run``)."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()

    def _start(self) -> None:
        from datapipe.procenv import sandbox_environ

        # -P: no working directory on sys.path, so a checkout's ``datapipe/`` folder (which lacks
        # ``datapipe.stages``: see pyproject's package-dir) cannot shadow the installed package.
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "datapipe.stages.lib.extract_sandbox"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=sandbox_environ())
        _grow_pipe(self.proc.stdin.fileno())
        _grow_pipe(self.proc.stdout.fileno())
        _write(self.proc.stdin, self.options)
        # Wait for the child's imports here, so start-up never counts against a document's deadline.
        fd = self.proc.stdout.fileno()
        head = _read_exact(fd, _LEN.size, time.monotonic() + 120)
        if head is None or pickle.loads(_read_exact(fd, _LEN.unpack(head)[0], None)) != "ready":
            self.close()
            raise RuntimeError("extraction sandbox did not start")

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - at interpreter exit the modules may be gone
            pass

    def run(self, items: list[tuple[bytes, str | None]], timeout_s: float) -> list[tuple]:
        """Extract each ``(payload, http_charset)``. Returns ``(text, codec, error, warnings)`` per item.

        The batch goes to the child in one message and results stream back one per document, each
        with its own deadline: one round trip per batch, not per page (on a full host the per-page
        ping-pong between worker and child cost more than the extraction). After a crash or an
        overrun the child is restarted and gets the rest of the batch.
        """
        out: list[tuple] = []
        while len(out) < len(items):
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            rest = items[len(out):]
            try:
                _write(self.proc.stdin, rest)
                fd = self.proc.stdout.fileno()
                for _ in rest:
                    deadline = time.monotonic() + timeout_s
                    head = _read_exact(fd, _LEN.size, deadline)
                    body = None if head is None else _read_exact(fd, _LEN.unpack(head)[0], deadline + 5)
                    if body is None:
                        self.close()
                        out.append((None, None, "extract:timeout", None))
                        break
                    out.append(pickle.loads(body))
            except (EOFError, BrokenPipeError, OSError):
                self.close()
                out.append((None, None, "extract:crash", None))
        return out


def _serve() -> None:
    from datapipe.stages.extract import extract_one

    inp, outp = sys.stdin.buffer, sys.stdout.buffer

    def read():
        head = inp.read(_LEN.size)
        if len(head) < _LEN.size:
            return None
        return pickle.loads(inp.read(_LEN.unpack(head)[0]))

    options = read()
    _write(outp, "ready")
    while True:
        batch = read()
        if batch is None:
            return
        for payload, charset in batch:
            try:
                result = extract_one(payload, charset, **options)
            except Exception as e:  # noqa: BLE001 - reported per document
                result = (None, None, f"extract:exception:{type(e).__name__}", None)
            _write(outp, result)


if __name__ == "__main__":
    _serve()
