"""The extraction sandbox's limits: CPU time, not wall time; a kill from outside is retried in a
fresh child; a page crashing two children is errored; the child's memory is capped."""
import os
import signal
import threading
import time

from datapipe.stages.lib.extract_page import extract_one
from datapipe.stages.lib.extract_sandbox import Sandbox

SMALL = (b"<html><body><article><p>" + b"Hello world, this is a paragraph of text. " * 50
         + b"</p></article></body></html>", "utf-8")


def nested(n: int) -> tuple[bytes, str]:
    # lexbor/resiliparse time grows with nesting depth: 8,000 divs ~1 s of CPU, 28,000 ~10-20 s
    return b"<html><body>" + b"<div>" * n + b"deep" + b"</div>" * n + b"</body></html>", "utf-8"


def _later(delay: float, fn) -> threading.Thread:
    t = threading.Thread(target=lambda: (time.sleep(delay), fn()), daemon=True)
    t.start()
    return t


def test_killed_child_is_retried_not_stored_as_crash():
    sb = Sandbox({})
    sb.start()
    pid = sb.proc.pid
    try:
        killer = _later(0.3, lambda: os.kill(pid, signal.SIGKILL))  # while the deep page is extracted
        got = sb.run([nested(8_000), SMALL], 30.0)
        killer.join()
        assert sb.proc.pid != pid  # a fresh child took over
    finally:
        sb.close()
    assert got == [extract_one(*nested(8_000)), extract_one(*SMALL)]
    assert got[0][0] == "deep"


def test_timeout_counts_cpu_not_waiting():
    # The child is stopped (as on a machine with no free core) for longer than the limit: the
    # page is still kept, since it used well under timeout_s of CPU.
    sb = Sandbox({})
    sb.start()
    pid = sb.proc.pid
    try:
        def pause():
            os.kill(pid, signal.SIGSTOP)
            time.sleep(3.0)
            os.kill(pid, signal.SIGCONT)
        pauser = _later(0.05, pause)
        t0 = time.monotonic()
        got = sb.run([nested(2_000), SMALL], 1.5)
        pauser.join()
        assert time.monotonic() - t0 > 3.0
    finally:
        sb.close()
    assert [g[2] for g in got] == [None, None] and got[0][0] == "deep"


def test_cpu_overrun_is_a_timeout_and_the_batch_goes_on():
    sb = Sandbox({})
    try:
        got = sb.run([SMALL, nested(28_000), SMALL], 1.0)
        assert sb.last_exit[0] == -signal.SIGPROF  # ended by its CPU timer
    finally:
        sb.close()
    assert [g[2] for g in got] == [None, "extract:timeout", None]
    assert got[0] == got[2] == extract_one(*SMALL)


class _Watched(Sandbox):
    """A sandbox that tells when each child is ready (the pid of the latest one)."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.ready = []

    def _start(self):
        super()._start()
        self.ready.append(self.proc.pid)


def test_page_that_crashes_two_children_is_errored():
    sb = _Watched({})
    killed = []

    def kill_two():  # every child that takes the deep page dies: a deterministic crash
        while len(killed) < 2:
            if sb.ready and sb.ready[-1] not in killed:
                pid = sb.ready[-1]
                time.sleep(0.3)  # inside the deep page (~1 s of CPU)
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.01)
    killer = _later(0.0, kill_two)
    try:
        got = sb.run([nested(8_000), SMALL], 30.0)
        killer.join(10)
    finally:
        sb.close()
    assert len(killed) == 2 and len(sb.ready) == 3  # the third child took the small page
    assert [g[2] for g in got] == ["extract:crash", None] and got[1] == extract_one(*SMALL)


def test_child_memory_is_capped():
    big = (b"<html><body>" + b"<div><p><b>word</b> text</p></div>" * 200_000 + b"</body></html>", "utf-8")
    limit = 300 << 20
    sb = Sandbox({}, memory_bytes=limit)
    try:
        got = sb.run([SMALL, big, SMALL], 30.0)
    finally:
        sb.close()
    # 6.6 MB of markup needs ~370 MB in the child without a cap (measured): errored with a reason,
    # the pages around it extracted by the same child, and the child never went over its cap.
    assert got[1][0] is None and got[1][2] is not None
    assert got[0] == got[2] == extract_one(*SMALL)
    assert 0 < sb.last_exit[1] < limit, (sb.last_exit, got[1][2])
