"""Worker warm-up (datapipe/engine/warmup.py): the chain set up beside the first task, each stage once."""
from __future__ import annotations

import threading
import time

from datapipe.engine import task, warmup
from datapipe.stage import Stage, StageConfig


def _fake_registry(log: list):
    def make(name):
        class Slow(Stage):
            Config = StageConfig

            def setup(self):
                log.append((name, threading.current_thread().name))
                time.sleep(0.3)  # long beside a thread start, even on a loaded machine

        Slow.name = name
        return Slow

    return {n: make(n) for n in ("a", "b", "c", "d")}


def test_warmup_and_a_task_set_up_each_stage_once(monkeypatch):
    log: list = []
    monkeypatch.setattr(task, "registry", lambda reg=_fake_registry(log): reg)
    monkeypatch.setattr(task, "_STAGE_CACHE", {})
    monkeypatch.setattr(task, "_SETUP_LOCKS", {})
    monkeypatch.setattr(warmup, "import_task_modules", lambda: None)
    chain = [{"a": {}}, {"b": {}}, {"c": {}}, {"d": {}}]
    plugin = warmup.ChainWarmup(chain, "phase1-")
    plugin.setup(worker=None)
    plugin.transition("phase1-f", "released", "waiting")  # the scheduler hands this worker a task
    built = task.build_chain(chain)  # the first task, meanwhile, in this thread
    plugin.thread.join(5)
    assert [st.name for st in built] == ["a", "b", "c", "d"] and all(st._ready for st in built)
    assert sorted(n for n, _ in log) == ["a", "b", "c", "d"]  # each set up exactly once
    warm = [n for n, th in log if th == "datapipe-warmup"]
    assert warm and warm == sorted(warm, reverse=True)  # the warm-up walks the chain from its end
    assert "d" in warm  # it started where the task was not


def test_only_a_phase1_task_starts_the_warmup(monkeypatch):
    started = []
    monkeypatch.setattr(warmup, "warm", lambda stages: started.append(stages))
    monkeypatch.setattr(warmup, "import_task_modules", lambda: None)
    plugin = warmup.ChainWarmup([{"a": {}}], "read-extract-filter-")
    plugin.setup(worker=None)
    plugin.transition("dedup-exact-0", "released", "waiting")  # a later phase's task
    plugin.transition(("read-extract-filter-x", 0), "released", "waiting")  # a tuple key is no phase-1 task
    plugin.transition("read-extract-filter-x-1", "waiting", "released")  # not to run here
    assert plugin.thread is None
    plugin.transition("read-extract-filter-x-1", "released", "waiting")
    plugin.transition("read-extract-filter-x-1", "waiting", "ready")
    plugin.transition("read-extract-filter-y-2", "released", "waiting")  # a second task: no second thread
    plugin.thread.join(5)
    assert started == [[{"a": {}}]]


def test_on_a_cluster_only_workers_given_phase1_tasks_warm_up(monkeypatch):
    """Issue 16: every worker set up the whole chain as it joined, so a one-file run on 16 workers
    paid 16 set-ups on the host's cores for one task. Now: the worker that runs the task, and a
    worker that joins later (as a replacement after a loss does) once it gets one."""
    from distributed import Client, LocalCluster, get_worker

    monkeypatch.setattr(warmup, "warm", lambda stages: None)  # in-process workers: no real chain
    monkeypatch.setattr(warmup, "import_task_modules", lambda: None)

    def name(_):
        return get_worker().name

    def warmed(dask_worker):
        plugin = dask_worker.plugins[warmup.ChainWarmup.name]
        assert plugin.imports is not None  # every worker imports the task modules as it joins
        return plugin.thread is not None

    with LocalCluster(n_workers=3, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.register_plugin(warmup.ChainWarmup([{"a": {}}], "read-extract-filter-"))
        assert not any(client.run(warmed).values())
        ran_on = client.submit(name, 0, key="read-extract-filter-one-abc", pure=False).result()
        client.submit(name, 1, key="dedup-exact-0", pure=False).result()  # a later phase's task warms nothing
        state = {client.cluster.scheduler.workers[a].name: w for a, w in client.run(warmed).items()}
        assert state == {n: n == ran_on for n in state}
        cluster.scale(4)  # a worker that joins later, as HealingLocalCluster's replacement does
        client.wait_for_workers(4)
        new = next(a for a, w in client.cluster.scheduler.workers.items() if w.name not in state)
        assert not client.run(warmed, workers=[new])[new]  # joined cold
        late = client.submit(name, 2, key="read-extract-filter-two-def", workers=[new], pure=False).result()
        assert client.run(warmed, workers=[new])[new] and late == client.cluster.scheduler.workers[new].name


def test_a_warming_worker_imports_the_task_modules_after_its_chain_an_idle_one_after_a_delay(monkeypatch):
    calls = []
    monkeypatch.setattr(warmup, "warm", lambda stages: calls.append(("warm", threading.current_thread().name)))
    monkeypatch.setattr(warmup, "import_task_modules",
                        lambda: calls.append(("imports", threading.current_thread().name)))
    busy, idle = (warmup.ChainWarmup([{"a": {}}], "read-extract-filter-") for _ in range(2))
    for p in (busy, idle):
        p.import_delay_s = 0.3
        p.setup(worker=None)
    busy.transition("read-extract-filter-x-1", "released", "waiting")  # a task within the delay
    busy.thread.join(5)
    busy.imports.join(5)
    idle.imports.join(5)
    assert calls.count(("warm", "datapipe-warmup")) == 1
    assert calls.count(("imports", "datapipe-warmup")) == 1  # after the chain, in the warm-up thread
    assert calls.count(("imports", "datapipe-imports")) == 1  # the idle worker's, after the delay
    assert calls.index(("warm", "datapipe-warmup")) < calls.index(("imports", "datapipe-warmup"))


def test_the_import_thread_loads_the_modules_tasks_unpickle():
    """In a fresh interpreter, as a worker starts: nothing of the run's task code before, all after."""
    import subprocess
    import sys

    mods = ["datapipe.engine.task", "datapipe.stages.phases.dedup.near", "datapipe.stages.phases.tokenize.phase"]
    code = (f"import sys; from datapipe.engine import warmup; mods = {mods!r}\n"
            "before = [m in sys.modules for m in mods]; warmup.import_task_modules()\n"
            "print(before, [m in sys.modules for m in mods])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert out.stdout.split("] [") == ["[False, False, False", "True, True, True]\n"], out.stderr[-2000:]


def test_a_failing_setup_in_the_warmup_is_left_to_the_task(monkeypatch):
    import pytest

    class Broken(Stage):
        name = "broken"
        Config = StageConfig

        def setup(self):
            raise FileNotFoundError("model.bin not found")

    monkeypatch.setattr(task, "registry", lambda: {"broken": Broken})
    monkeypatch.setattr(task, "_STAGE_CACHE", {})
    monkeypatch.setattr(task, "_SETUP_LOCKS", {})
    warmup.warm([{"broken": {}}])  # logged, not raised
    with pytest.raises(FileNotFoundError, match="model.bin"):
        task.build_chain([{"broken": {}}])


def test_dedup_signatures_setup_loads_the_kernels():
    """Issue 16: numba's first call (cache load + target context) happened in the first batch,
    counted as dedup_signatures stage time; now it is part of setup."""
    from datapipe.stages.dedup_signatures import DedupSignatures
    from datapipe.stages.lib import minhash_kernel as kernel

    DedupSignatures().ensure_setup()
    assert kernel.minhash_batch.signatures  # compiled (or loaded from the cache) for its argument types


def test_word_splitting_stages_build_their_tables_in_setup(monkeypatch):
    """The RE2 punctuation set (~0.4 s once per process) was built in the first batch, counted as
    gopher_repetition's stage time on a one-page run."""
    from datapipe.stages.gopher import GopherRepetition
    from datapipe.stages.lib import words

    monkeypatch.setattr(words, "_EDGE_SET", None)
    GopherRepetition().ensure_setup()
    assert words._EDGE_SET and "!" in words._EDGE_SET and "a" not in words._EDGE_SET


def test_eager_warmup_starts_as_the_worker_joins(monkeypatch):
    """With a core per worker (the runner's ``eager``) every worker warms up at once, task or not."""
    started = []
    monkeypatch.setattr(warmup, "warm", lambda stages: started.append(stages))
    monkeypatch.setattr(warmup, "import_task_modules", lambda: started.append("imports"))
    plugin = warmup.ChainWarmup([{"a": {}}], "read-extract-filter-", eager=True)
    plugin.setup(worker=None)
    assert plugin.thread is not None
    plugin.thread.join(5)
    assert started == [[{"a": {}}], "imports"]  # the chain, then the later phases' modules
    plugin.transition("read-extract-filter-x-1", "released", "waiting")  # no second thread
    assert started == [[{"a": {}}], "imports"]
