"""Set up the phase-1 chain on a worker as its first phase-1 task arrives, beside the task.

A worker's first task used to load every model, start the extraction sandbox child and load
numba's compiled MinHash kernels before its first batch (measured: most of phase 1's time on a
small input; the kernels' load was counted as ``dedup_signatures`` stage time). ``ChainWarmup``,
registered by the runner at the start of phase 1, starts one daemon thread on a worker when the
scheduler hands that worker its first phase-1 task (a key starting with ``key_prefix``). The
thread runs ``task.build_chain`` on the chain in reverse order while the task walks it forward,
so the two meet in the middle (per-stage locks in ``build_chain``: each stage is set up once),
and while one waits for the sandbox child to start the other imports and loads models.

With ``eager`` (the runner sets it when the cluster has no more workers than the client's host
has cores) every worker warms up as it joins, in parallel on its own core: the later phases'
tasks then find warm workers wherever they land (device, one page, 16 workers: fixed cost 15.2 s
with lazy warm-up, the dedup phase 4.2 s on cold workers; 10.9 s and 1.0 s warming all). Without
it, only workers that get phase-1 work warm up: on an oversubscribed host (4 workers on 2 cores)
a one-file run then sets up one chain, not one per worker contending for the cores (we
measured ~6 CPU-s per extra worker). A worker
that joins later (a replacement after a loss, ``datapipe.engine.cluster``) warms up when it gets
a task, like the others. A worker with no phase-1 task a second after it joined only imports
the modules the run's tasks unpickle (``import_task_modules``, ~0.3 CPU-s; a warming worker
does it after its chain): a later phase's first task on a worker without phase-1 work then does
not wait for them (each of the dedup phase's sequential steps may land on
another such worker). Such a worker loads the later phases' numba kernels on first use (dedup's
near-duplicate check, only when there are candidate pairs); every phase-1 stage's setup, the
kernels included, stays out of its stage time on every worker that runs one. Outputs do not
change: setup only fills per-process caches.

A setup that fails in the thread is dropped there; the task's own ``build_chain`` meets the same
error and reports it as before (the file's task errors with the reason).
"""
from __future__ import annotations

import logging
import threading

from distributed.diagnostics.plugin import WorkerPlugin

log = logging.getLogger("datapipe")

#: Worker-side task states that mean "this worker is to run the task" (distributed's worker state
#: machine: a new compute task goes released -> waiting -> ready -> executing).
_ASSIGNED = ("waiting", "ready", "constrained", "executing")


def import_task_modules() -> None:
    """Import phase 1's task module and every registered phase's module (their task functions)."""
    # Lazy, on purpose: this is the import thread's work (the plugin itself loads before any task code).
    import datapipe.engine.task  # noqa: F401 - run_file_task
    from datapipe.phase import phases

    try:
        phases()
    except Exception as e:  # noqa: BLE001 - a task that needs the module reports it
        log.debug("import of the phase modules failed (a task will report it): %s", e)


def warm(stages: list[dict]) -> None:
    """Set up every stage of ``stages`` (a chain as in a TaskSpec), last first; errors are logged."""
    # Lazy: see import_task_modules.
    from datapipe.engine.task import build_chain

    for item in reversed(stages):
        try:
            build_chain([item])
        except Exception as e:  # noqa: BLE001 - the task's own setup reports it with the file
            log.debug("warm-up of %s failed (the task will report it): %s", next(iter(item)), e)


class ChainWarmup(WorkerPlugin):
    """Worker plugin: ``warm(stages)`` in a daemon thread on each worker, once, when the first
    task whose key starts with ``key_prefix`` is assigned to it (present and future workers);
    ``import_task_modules`` in another as each worker joins. ``thread`` is None on a worker that
    has had no such task; ``imports`` is the import thread."""

    name = "datapipe-chain-warmup"

    def __init__(self, stages: list[dict], key_prefix: str, eager: bool = False):
        self.stages = stages
        self.key_prefix = key_prefix
        self.eager = eager
        self.thread: threading.Thread | None = None
        self.imports: threading.Thread | None = None

    #: Seconds a joining worker waits for a phase-1 task before it imports the task modules: on a
    #: worker that gets one, the imports would share its GIL with the chain's set-up (measured
    #: +0.9 s of phase 1 at 2 workers); there the warm-up thread imports them after the chain.
    import_delay_s = 1.0

    def setup(self, worker) -> None:
        self.thread = None  # each worker's copy starts cold
        if self.eager:  # every worker has a core of its own: warm up now, beside the others
            self.imports = None
            self.start()
            return
        self.imports = threading.Timer(self.import_delay_s, self._imports_unless_warming)
        self.imports.name, self.imports.daemon = "datapipe-imports", True
        self.imports.start()

    def _imports_unless_warming(self) -> None:
        if self.thread is None:
            import_task_modules()

    def transition(self, key, start: str, finish: str, **kwargs) -> None:
        # Called on the worker's event loop for every task transition: keep it a few comparisons.
        if self.thread is None and finish in _ASSIGNED and isinstance(key, str) and key.startswith(self.key_prefix):
            self.start()

    def _warm(self) -> None:
        warm(self.stages)
        import_task_modules()  # the later phases' modules, once the chain is set up

    def start(self) -> None:
        """Start the warm-up thread (no-op when it has started already)."""
        if self.thread is None:
            self.thread = threading.Thread(target=self._warm, name="datapipe-warmup", daemon=True)
            self.thread.start()
