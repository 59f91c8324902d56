"""datapipe.engine.cluster: a worker that Dask's LocalCluster drops for good comes back.

Regression for the hang of the kill-a-worker-in-every-dedup-step test (issue 17): Dask's
SpecCluster closes a worker's nanny when, ``lost-worker-timeout`` after a loss, no worker of
that name is connected, even when it came back in between and is only restarting again."""
from __future__ import annotations

import asyncio
import os
import signal
import time
from contextlib import contextmanager

import dask
from distributed import Client, LocalCluster
from distributed.core import Status

from datapipe.engine.cluster import HealingLocalCluster


def _wait(pred, timeout: float = 60.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


@contextmanager
def _kill(cls):
    """A ``cls`` cluster of one worker whose lost-worker timeout (0.2 s) is shorter than a restart,
    its worker SIGKILLed: yields (cluster, client, the killed nanny, the killed pid)."""
    with dask.config.set({"distributed.deploy.lost-worker-timeout": "0.2s"}), \
            cls(n_workers=1, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0") as lc, Client(lc) as cl:
        nanny = lc.workers[0]
        pid = nanny.pid
        os.kill(pid, signal.SIGKILL)
        assert _wait(lambda: not cl.scheduler_info()["workers"], 30)
        yield lc, cl, nanny, pid


def test_dask_local_cluster_drops_a_worker_lost_past_the_timeout():
    """The control: Dask's own LocalCluster closes the nanny that was restarting the worker, and
    nothing starts another (why ours exists)."""
    with _kill(LocalCluster) as (lc, cl, nanny, _):
        assert _wait(lambda: nanny.status == Status.closed, 30)
        assert 0 not in lc.workers and not lc.workers


def test_healing_cluster_waits_for_a_slow_restart():
    """A restart slower than the timeout is waited for: the same nanny brings the worker back."""
    with _kill(HealingLocalCluster) as (lc, cl, nanny, pid):
        assert _wait(lambda: len(cl.scheduler_info()["workers"]) == 1, 60)
        assert cl.submit(os.getpid, pure=False).result(timeout=30) != pid
        assert lc.replaced == 0 and lc.workers[0] is nanny


def test_healing_cluster_replaces_a_worker_whose_nanny_is_gone():
    """The nanny closes too (as when it gives up on a worker, or its own process is lost): a new
    nanny of the same spec brings the worker back."""
    with _kill(HealingLocalCluster) as (lc, cl, nanny, pid):
        lc.sync(nanny.close)
        # Wait for the end state, not for any worker named 0: the closing nanny may register its
        # restarted process for a moment before it closes it (seen once on a loaded machine).
        assert _wait(lambda: lc.replaced == 1 and lc.workers.get(0) not in (None, nanny)
                     and len(cl.scheduler_info()["workers"]) == 1, 90)
        assert cl.submit(os.getpid, pure=False).result(timeout=30) != pid
        assert lc.replaced == 1 and lc.workers[0] is not nanny


class _Stub:
    """The state HealingLocalCluster's timer logic reads, without processes."""

    def __init__(self):
        from collections import Counter

        self.scheduler_info = {"workers": {}}
        self._registrations, self.replaced, self.status = Counter(), 0, Status.running
        self._futures, self.replacing, self._replacing, self.workers = set(), [], set(), {}
        self.max_replacements = HealingLocalCluster.max_replacements

    async def _replace(self, name):
        self.replacing.append(name)

    _lost = HealingLocalCluster._lost
    _update_worker_status = HealingLocalCluster._update_worker_status


def test_a_worker_that_came_back_is_not_replaced_by_an_earlier_loss_timer():
    """Lost, back, lost again within the timeout: only the second loss's timer may act, and it
    replaces the worker only if it is still missing when that timer fires."""

    async def scenario(back_again: bool) -> list:
        s = _Stub()
        s._update_worker_status("add", {"workers": {"tcp://a": {"name": 0}}})
        s._update_worker_status("remove", "tcp://a")                        # loss 1 at t = 0
        await asyncio.sleep(0.1)
        s._update_worker_status("add", {"workers": {"tcp://b": {"name": 0}}})   # back at 0.1
        s._update_worker_status("remove", "tcp://b")                        # loss 2 at 0.1
        await asyncio.sleep(0.15)   # loss 1's timer fired at 0.2: worker 0 is down, but came back since
        assert s.replacing == []
        if back_again:
            s._update_worker_status("add", {"workers": {"tcp://c": {"name": 0}}})
        await asyncio.sleep(0.15)   # loss 2's timer at 0.3
        await asyncio.gather(*s._futures)
        return s.replacing

    with dask.config.set({"distributed.deploy.lost-worker-timeout": "0.2s"}):
        assert asyncio.run(scenario(back_again=True)) == []
        assert asyncio.run(scenario(back_again=False)) == [0]
