"""Per-process settings for Dask workers (and the extraction child each one starts).

One host runs one worker process per core, so anything that assumes it owns the machine costs
every worker once the host is full (measured: phase-1 efficiency fell to 64% at 16 workers, the
per-stage seconds summed over workers grew 109 s -> 151 s, mostly in read and extract):

* **glibc malloc.** Dask's default ``MALLOC_TRIM_THRESHOLD_=65536`` (to hand freed memory back to
  the OS) also switches off glibc's adaptive mmap threshold, so every allocation over 128 KiB (an
  HTML payload, its decompressed record, its pickle to the extraction child) is a fresh
  ``mmap`` and page faults, and freeing it a ``munmap``. Measured on one process: 3.7x the page
  faults (385k vs 104k) and ~12% slower phase 1; page faults also contend in the kernel across
  processes. 8 MiB for both thresholds keeps payload-sized buffers in the heap and still returns
  anything larger (a 200 MB record) to the OS at once.
* **Library thread pools** size themselves to all cores *per process*: pyarrow's CPU pool,
  OpenBLAS/OpenMP (sklearn, scipy), numba, Rust's rayon (HF tokenizers in phase 3). With one
  worker process per core they are capped to the worker's own threads.
* **Dask's statistical profiler** samples every worker's stack every 10 ms under the GIL; phase 1
  is one long task per file, so the profile tells nothing the per-stage ledger does not.

``worker_environ`` must be in the environment *before* a worker starts (glibc and the BLAS/OpenMP
runtimes read it once at load): ``runner.local_cluster`` passes it as Dask's ``pre-spawn-environ``.
On an external cluster set the same variables where ``dask worker`` starts; ``ProcessLimits`` (a
worker plugin ``runner.run`` registers on every cluster) caps what can still be capped at runtime.
"""
from __future__ import annotations

import os

#: glibc malloc: see the module docstring.
MALLOC_ENV = {"MALLOC_TRIM_THRESHOLD_": str(8 << 20), "MALLOC_MMAP_THRESHOLD_": str(8 << 20)}
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS",
                "RAYON_NUM_THREADS")

#: Dask config for a LocalCluster's workers (see the module docstring).
DASK_CONFIG = {"distributed.worker.profile.enabled": False}


def worker_environ(threads: int) -> dict[str, str]:
    """Environment variables for a worker process that runs ``threads`` task threads."""
    n = str(max(1, int(threads)))
    return {**MALLOC_ENV, **{k: n for k in _THREAD_VARS}}


def sandbox_environ() -> dict[str, str]:
    """Environment for the extraction child (stages/extract_sandbox.py): the worker's, with the
    malloc settings whatever the worker was started with (it parses payload-sized HTML)."""
    return {**os.environ, **MALLOC_ENV}


def limit_threads(threads: int) -> None:
    """Cap the thread pools that can still be capped in a running process."""
    import pyarrow as pa

    n = max(1, int(threads))
    pa.set_cpu_count(n)
    os.environ["RAYON_NUM_THREADS"] = str(n)  # read when tokenizers first starts its pool
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(n)  # BLAS / OpenMP runtimes already loaded
    except ImportError:
        pass


from distributed.diagnostics.plugin import WorkerPlugin


class ProcessLimits(WorkerPlugin):
    """Worker plugin: ``limit_threads(worker's nthreads)`` on every worker, present and future."""

    name = "datapipe-process-limits"

    def setup(self, worker) -> None:
        limit_threads(worker.state.nthreads)
