"""Set up the phase-1 chain on every worker as it joins, beside the work, not inside it.

A worker's first task used to load every model, start the extraction sandbox child and load
numba's compiled MinHash kernels before its first batch (issue 16: most of phase 1's time on a
small input; the kernels' load was counted as ``dedup_signatures`` stage time). ``ChainWarmup``,
registered by the runner at the start of phase 1, starts one daemon thread per worker that runs
``task.build_chain`` on the chain in reverse order: a task arriving meanwhile walks the chain
forward, so the two meet in the middle (per-stage locks in ``build_chain``: each stage is set up
once), and while one waits for the sandbox child to start the other imports and loads models.
A worker that gets no phase-1 task (one small file, several workers) is ready for the later
phases' numba kernels. Outputs do not change: setup only fills per-process caches.

A setup that fails in the thread is dropped there; the task's own ``build_chain`` meets the same
error and reports it as before (the file's task errors with the reason).
"""
from __future__ import annotations

import logging
import threading

try:
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError:  # pragma: no cover - distributed is a dependency
    WorkerPlugin = object

log = logging.getLogger("datapipe")


def warm(stages: list[dict]) -> None:
    """Set up every stage of ``stages`` (a chain as in a TaskSpec), last first; errors are logged."""
    from datapipe.task import build_chain

    for item in reversed(stages):
        try:
            build_chain([item])
        except Exception as e:  # noqa: BLE001 - the task's own setup reports it with the file
            log.debug("warm-up of %s failed (the task will report it): %s", next(iter(item)), e)


class ChainWarmup(WorkerPlugin):
    """Worker plugin: ``warm(stages)`` in a daemon thread on every worker, present and future."""

    name = "datapipe-chain-warmup"

    def __init__(self, stages: list[dict]):
        self.stages = stages
        self.thread: threading.Thread | None = None

    def setup(self, worker) -> None:
        self.thread = threading.Thread(target=warm, args=(self.stages,), name="datapipe-warmup", daemon=True)
        self.thread.start()
