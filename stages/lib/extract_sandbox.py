"""Run resiliparse extraction in a child process, one document at a time, with CPU and memory limits.

Why: lexbor (under resiliparse) has crashed whole processes on some markup (case B15's
``<svg><template>``), a pathological page can take minutes, and a small page can build a DOM of a
gigabyte. A crash, an overrun or a memory bomb in the child costs one document, never the Dask
worker. The child is a plain ``subprocess`` (Dask worker processes are daemonic and may not fork
``multiprocessing`` children). Messages are length-prefixed pickles over stdin/stdout.

Limits, so that what is kept does not depend on the machine's load:

* time is the child's **CPU time** per document (``ITIMER_PROF``: user + system seconds of the
  child): a page over ``timeout_s`` kills the child with SIGPROF and is errored ``extract:timeout``,
  however long it waited for a core. A wall-clock backstop (``WALL_FACTOR`` x the limit + 30 s)
  only catches a child that no longer runs at all.
* memory is the child's data segment (``RLIMIT_DATA``: heap and private mappings, ``memory_bytes``):
  a page whose extraction needs more is errored ``extract:memory`` (Python's MemoryError) and the
  child goes on with the next; a child that dies of it is handled as a crash.
* a crash (the child dies for another reason: a lexbor bug, or a kill from outside) is retried
  once in a fresh child; only a document that crashes that child too is errored ``extract:crash``.
  A kill from outside therefore never leaves a stored error that a fresh run would not have.
"""
from __future__ import annotations

import fcntl
import json
import os
import pickle
import resource
import select
import signal
import struct
import subprocess
import sys
import threading
import time

from datapipe.engine.procenv import sandbox_environ
from datapipe.stages.lib.extract_page import extract_one

_LEN = struct.Struct("<Q")
#: Wall-clock backstop per document: this many times the CPU limit, plus 30 s.
WALL_FACTOR = 10
#: Payload bytes sent to the child per message (at least one document): the child holds one message.
MESSAGE_BYTES = 8 << 20


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


def shared_sandbox(options: dict, memory_bytes: int | None = None) -> Sandbox:
    """This thread's sandbox for ``options``, made on first use: every extract stage object with
    the same settings in one thread uses one child (``datapipe.stages.get("extract")`` called
    again and again started a child per object, 0.6-1.1 s each). Per thread, because one child
    serves one request at a time; a thread's children close when the thread ends."""
    pool = _LOCAL.__dict__.setdefault("pool", {})
    key = json.dumps([options, memory_bytes], sort_keys=True, default=str)
    if key not in pool:
        pool[key] = Sandbox(options, memory_bytes=memory_bytes)
    return pool[key]


class Sandbox:
    """A persistent child that extracts documents; restarted after a crash or an overrun.

    ``options``: keyword arguments of ``extract_one``; ``memory_bytes``: the child's
    ``RLIMIT_DATA`` (None = no limit). ``last_exit``: ``(exit code, peak RSS in bytes)`` of the
    child reaped last (None before any; the peak is 0 for a child reaped by ``poll``).
    """

    def __init__(self, options: dict, memory_bytes: int | None = None):
        self.options = options
        self.memory_bytes = memory_bytes
        self.proc: subprocess.Popen | None = None
        self.last_exit: tuple[int, int] | None = None

    def start(self) -> None:
        """Start the child if it is not running (also done lazily by ``run``)."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()

    def _start(self) -> None:
        # -P: no working directory on sys.path, so a checkout's ``datapipe/`` folder (which lacks
        # ``datapipe.stages``: see pyproject's package-dir) cannot shadow the installed package.
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "datapipe.stages.lib.extract_sandbox"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=sandbox_environ())
        _grow_pipe(self.proc.stdin.fileno())
        _grow_pipe(self.proc.stdout.fileno())
        _write(self.proc.stdin, (self.options, self.memory_bytes))
        # Wait for the child's imports here, so start-up never counts against a document's deadline.
        fd = self.proc.stdout.fileno()
        try:
            head = _read_exact(fd, _LEN.size, time.monotonic() + 120)
            ok = head is not None and pickle.loads(_read_exact(fd, _LEN.unpack(head)[0], None)) == "ready"
        except (EOFError, OSError):
            ok = False
        if not ok:
            self.close()
            raise RuntimeError("extraction sandbox did not start")

    def close(self) -> None:
        """Kill and reap the child (``last_exit`` gets its exit code and peak RSS)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.returncode is not None:  # reaped by poll(): no usage to read
            self.last_exit = (proc.returncode, 0)
        else:
            # os.kill, not Popen.kill: that reaps the child first (poll) and its usage is lost.
            # A child that has already exited keeps its status (a zombie ignores the signal).
            peak = _peak_rss(proc.pid)
            os.kill(proc.pid, signal.SIGKILL)
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            self.last_exit = (proc.returncode, peak or usage.ru_maxrss * 1024)
        for fh in (proc.stdin, proc.stdout):
            try:
                fh.close()
            except OSError:
                pass

    def _died(self) -> str:
        """Reap a child whose pipe broke: ``cpu`` (its CPU limit ended it) or ``crash``."""
        _exited(self.proc.pid)  # closing its pipes was part of its exit: let that finish first
        self.close()
        return "cpu" if self.last_exit and self.last_exit[0] == -signal.SIGPROF else "crash"

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - at interpreter exit the modules may be gone
            pass

    def run(self, items: list[tuple[bytes, str | None]], timeout_s: float) -> list[tuple]:
        """Extract each ``(payload, http_charset)``. Returns ``(text, codec, error, warnings)`` per item.

        Documents go to the child in messages of about ``MESSAGE_BYTES`` and results stream back
        one per document: one round trip per message, not per page (on a full host the per-page
        ping-pong between worker and child cost more than the extraction). ``timeout_s`` is CPU
        seconds per document (module docstring). After a crash the child is restarted and the
        document is tried once more; after an overrun the rest goes to a fresh child.
        """
        if timeout_s <= 0:  # no page runs in no CPU time (a timer of 0 would not fire at all)
            return [(None, None, "extract:timeout", None) for _ in items]
        out: list[tuple] = []
        crashed = False  # the document at len(out) crashed a child once already
        while len(out) < len(items):
            if self.proc is None or self.proc.poll() is not None:
                self.close()
                self._start()
            chunk = _message(items, len(out))
            failure = None
            try:
                _write(self.proc.stdin, (timeout_s, chunk))
                fd = self.proc.stdout.fileno()
                for _ in chunk:
                    deadline = time.monotonic() + WALL_FACTOR * timeout_s + 30
                    head = _read_exact(fd, _LEN.size, deadline)
                    body = None if head is None else _read_exact(fd, _LEN.unpack(head)[0], deadline + 5)
                    if body is None:
                        self.close()
                        failure = "stalled"
                        break
                    out.append(pickle.loads(body))
                    crashed = False
            except (EOFError, BrokenPipeError, OSError):
                failure = self._died()
            if failure == "cpu":
                out.append((None, None, "extract:timeout", None))
            elif failure is not None:  # crash or stall: once may be the machine, twice is the page
                if crashed:
                    out.append((None, None, "extract:crash" if failure == "crash" else "extract:timeout", None))
                crashed = not crashed
        return out


def _peak_rss(pid: int) -> int | None:
    """Peak RSS of a live child since its exec, bytes (``VmHWM``; None where unreadable). The
    rusage of ``wait4`` is no substitute: Linux carries the parent's peak at fork into it."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _exited(pid: int, wait_s: float = 2.0) -> bool:
    """Whether child ``pid`` has exited within ``wait_s`` (polled, not reaped)."""
    end = time.monotonic() + wait_s
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:
            return False
        if time.monotonic() > end:
            return False
        time.sleep(0.005)


def _message(items: list, start: int) -> list:
    """Items from ``start`` on, up to ``MESSAGE_BYTES`` of payload (at least one)."""
    end, size = start, 0
    while end < len(items) and (end == start or size + len(items[end][0]) <= MESSAGE_BYTES):
        size += len(items[end][0])
        end += 1
    return items[start:end]


def _serve() -> None:
    inp, outp = sys.stdin.buffer, sys.stdout.buffer

    def read():
        head = inp.read(_LEN.size)
        if len(head) < _LEN.size:
            return None
        return pickle.loads(inp.read(_LEN.unpack(head)[0]))

    options, memory_bytes = read()
    if memory_bytes is not None:
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if hard != resource.RLIM_INFINITY:
            memory_bytes = min(memory_bytes, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, hard))
    signal.signal(signal.SIGPROF, signal.SIG_DFL)  # over the CPU limit: the process ends, even inside C code
    _write(outp, "ready")
    while True:
        message = read()
        if message is None:
            return
        timeout_s, batch = message
        for payload, charset in batch:
            signal.setitimer(signal.ITIMER_PROF, timeout_s)
            try:
                result = extract_one(payload, charset, **options)
            except MemoryError:
                result = (None, None, "extract:memory", None)
            except Exception as e:  # noqa: BLE001 - reported per document
                result = (None, None, f"extract:exception:{type(e).__name__}", None)
            finally:
                signal.setitimer(signal.ITIMER_PROF, 0)
            del payload
            _write(outp, result)


if __name__ == "__main__":
    _serve()
