"""A ``distributed.LocalCluster`` that keeps its size when worker processes are killed.

A Nanny restarts its worker process when it dies, but the LocalCluster (a ``SpecCluster``) drops
a worker for good in two cases, both seen when a worker is killed in several dedup steps in a
row:

* on each worker loss it starts a ``distributed.deploy.lost-worker-timeout`` timer (15 s) and,
  when it fires, closes the nanny if no worker of that name is connected *at that moment*. A
  worker killed twice within 15 s, still restarting from the second kill when the first timer
  fires, has its nanny closed although it came back in between (distributed 2026.8.0,
  ``SpecCluster._update_worker_status``);
* a worker whose nanny is gone (closed, or given up on a worker that failed to start: by design
  since dask/distributed#6427) is never started again.

With two workers both lost, tasks wait for a worker forever: the phase hangs. Here the timer of a
loss does nothing when a worker of that name registered since the loss (it came back; a later
loss has its own timer), looks again later while the nanny is still restarting it (a slow start
on a loaded host), and a worker still missing when its timer fires is replaced by a fresh nanny
of the same spec, at most ``max_replacements`` times over the cluster's life (a worker
that can never start, e.g. a broken environment, still ends in an error, not in a loop).
"""
from __future__ import annotations

import asyncio
import logging
from collections import Counter

import dask
from dask.utils import parse_timedelta
from distributed import LocalCluster
from distributed.core import Status
from distributed.deploy.cluster import Cluster

log = logging.getLogger(__name__)


class HealingLocalCluster(LocalCluster):
    """``LocalCluster`` (same arguments) whose lost workers come back (module docstring).
    ``replaced``: workers replaced so far; ``max_replacements`` bounds it."""

    max_replacements = 32

    def __init__(self, *args, **kwargs):
        self._registrations: Counter = Counter()   # name -> times a worker of that name registered
        self._replacing: set = set()   # names being replaced: the old nanny's loss is no new loss
        self.replaced = 0
        super().__init__(*args, **kwargs)

    def _update_worker_status(self, op, msg):
        if op == "add":
            for info in msg.get("workers", {}).values():
                self._registrations[info.get("name")] += 1
        elif op == "remove" and msg in self.scheduler_info["workers"]:
            name = self.scheduler_info["workers"][msg]["name"]
            delay = parse_timedelta(dask.config.get("distributed.deploy.lost-worker-timeout"))
            asyncio.get_running_loop().call_later(delay, self._lost, name, self._registrations[name])
        # Cluster's bookkeeping, not SpecCluster's timer (replaced by _lost)
        Cluster._update_worker_status(self, op, msg)

    def _lost(self, name, registrations: int) -> None:
        """A ``lost-worker-timeout`` after worker ``name`` was lost: replace it unless it came back."""
        if self.status != Status.running or self._registrations[name] != registrations or name in self._replacing:
            return
        if any(d.get("name") == name for d in self.scheduler_info["workers"].values()):
            return
        if _restarting(self.workers.get(name)):   # a slow restart (a loaded host) is no loss: look again later
            delay = parse_timedelta(dask.config.get("distributed.deploy.lost-worker-timeout"))
            asyncio.get_running_loop().call_later(delay, self._lost, name, registrations)
            return
        if self.replaced >= self.max_replacements:
            log.error("worker %s did not come back and %d workers were replaced already: not replacing it",
                      name, self.replaced)
            return
        self.replaced += 1
        log.warning("worker %s did not come back within the lost-worker timeout: starting a new one", name)
        self._futures.add(asyncio.ensure_future(self._replace(name)))

    async def _replace(self, name) -> None:
        """Close the nanny of ``name`` (if any) and start a new one from ``worker_spec``."""
        self._replacing.add(name)
        try:
            old = self.workers.pop(name, None)
            if old is not None:
                await old.close()   # its worker must not register under the same name as the new one
            if self.status == Status.running:
                await self._correct_state()   # opens every worker of worker_spec not in self.workers
        finally:
            self._replacing.discard(name)


def _restarting(nanny) -> bool:
    """True while ``nanny`` is up and its worker process is starting or running (not given up)."""
    proc = getattr(nanny, "process", None)
    return (nanny is not None and nanny.status == Status.running and proc is not None
            and getattr(proc, "status", None) in (Status.starting, Status.running))
