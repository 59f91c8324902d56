"""Dedup phase 2 under faults (issue 17): a worker killed in a step (as the step's first task
starts, or after it wrote its files but before it reported) costs that step's lost tasks and the
output is byte-identical to an undisturbed run; a driver crash mid-plan resumes at the first
unfinished step.

The kills run on the cluster ``datapipe run`` starts (``runner.local_cluster``): with Dask's own
LocalCluster a worker killed in several steps in a row is dropped for good and the phase waits
for workers forever (tests/test_healing_cluster.py). pytest-timeout turns a hang into a failure.
"""
from __future__ import annotations

import os
import time

import pytest
from dedup_fixtures import write_shards
from distributed import Client
from distributed.diagnostics.plugin import WorkerPlugin
from scale_corpus import make_corpus

from datapipe.api.dedup import SyncClient
from datapipe.engine.runner import local_cluster
from datapipe.stages.phases.dedup.config import DedupConfig
from datapipe.stages.phases.dedup.phase import load_stats, run_dedup

#: Every phase-2 step of the config below, in order (cc3/cc4 and later rounds are star rounds too).
STEPS = ["exact_map", "exact_reduce", "lines_map", "lines_reduce", "lines_edit", "bands_map", "bands_reduce",
         "verify_src", "verify_dst", "cc1", "cc2", "labels", "comps_map", "comps_reduce", "ngram_map",
         "ngram_reduce", "ngram_edit", "apply"]
#: make test's subset, one of each kind: a map over shards, a streaming reduce over partitions, the
#: exact-Jaccard check (two outputs per task), a star round, a text-editing step, the final write.
FAST_STEPS = ["exact_map", "bands_reduce", "verify_src", "cc2", "ngram_edit", "apply"]
#: Killed after the task wrote its files, before its result reached the scheduler (the others: as it starts).
AFTER_WRITE = {"exact_map", "bands_reduce", "verify_dst", "cc2", "comps_map", "ngram_reduce", "apply"}


#: Three single-thread workers: while a killed one restarts (seconds: a fresh interpreter imports
#: distributed and the dedup modules), the others go on.
WORKERS = 3


class _KillOnce(WorkerPlugin):
    """Kills its worker process (``os._exit``) in the first task of each listed step: as the task
    starts executing, or (steps in ``after``) once it has run, before the result is reported."""

    def __init__(self, flag_dir: str, steps: list[str], after: set[str]):
        self.flag_dir, self.steps, self.after = flag_dir, list(steps), set(after)

    def transition(self, key, start, finish, **kwargs):
        k = key if isinstance(key, str) else str(key)
        if not k.startswith("dedup-"):
            return
        step = k[len("dedup-"):].rsplit("-", 2)[0]
        when = "memory" if step in self.after else "executing"
        if step not in self.steps or finish != when:
            return
        try:
            fd = os.open(os.path.join(self.flag_dir, step), os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return
        os.close(fd)
        os._exit(1)


def _corpus():
    c = make_corpus(800, seed=9, giant_fraction=0.2)
    for i in range(0, len(c.docs) - 1, 10):   # paragraphs shared across documents, for the ngram step
        c.docs[i] = dict(c.docs[i], text=c.docs[i + 1]["text"] + "\n" + c.docs[i]["text"])
    for i in range(3, len(c.docs), 15):       # a boilerplate line in 54 documents, for the lines step
        c.docs[i] = dict(c.docs[i], text=c.docs[i]["text"] + "\nSubscribe to our newsletter for more stories.")
    return c.docs


CFG = DedupConfig(partitions=3, lines={"enabled": True, "max_count": 40},
                  ngram={"enabled": True, "mode": ["paragraph", "document"], "ngram": 5, "threshold": 0.3})


def _write(run, docs, nshards=3):
    write_shards(str(run), {f"part-{k}": docs[k::nshards] for k in range(nshards)})


def _outputs(run) -> dict:
    """Every file under documents/ and rejected/ (temporary files included) -> its bytes."""
    return {f"{sub}/{p.name}": p.read_bytes() for sub in ("documents", "rejected")
            for p in sorted((run / sub).iterdir())}


def _counts(c: dict) -> dict:
    return {k: (v.n_in, v.kept, v.bytes_in, v.bytes_out) for k, v in c.items()}


def _kill_run(tmp_path, steps: list[str]):
    docs = _corpus()
    fresh, killed, flags = tmp_path / "fresh", tmp_path / "killed", tmp_path / "flags"
    _write(fresh, docs)
    _write(killed, docs)
    flags.mkdir()
    with local_cluster(WORKERS, 1, memory_limit=0, dashboard_address="127.0.0.1:0", retries=2) as lc, Client(lc) as cl:
        want = run_dedup(cl, str(fresh), CFG)
        assert {s.split("-")[0] for s in load_stats(str(fresh))["seconds_per_step"]} >= set(STEPS) - {"apply"}
        cl.register_plugin(_KillOnce(str(flags), steps, AFTER_WRITE))
        t = time.perf_counter()
        got = run_dedup(cl, str(killed), CFG, retries=2)
        print(f"{len(steps)} kills: {time.perf_counter() - t:.1f} s; workers replaced: {lc.replaced}")
        assert len(cl.scheduler_info()["workers"]) >= 1
    assert sorted(os.listdir(flags)) == sorted(steps)     # a worker died in each step
    assert _outputs(killed) == _outputs(fresh)
    assert _counts(got) == _counts(want)
    assert want["dedup_ngram"].bytes_out < want["dedup_ngram"].bytes_in   # the ngram step did something
    assert load_stats(str(fresh))["docs_line_edited"] > 0                    # and the lines step


@pytest.mark.slow  # make test-slow: a long fault/figure run (make test stays near 15 min)
@pytest.mark.timeout(240)
def test_worker_killed_in_six_kinds_of_step_same_output(tmp_path):
    _kill_run(tmp_path, FAST_STEPS)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_worker_killed_in_every_step_same_output(tmp_path):
    _kill_run(tmp_path, STEPS)


class _CrashAt(SyncClient):
    """The driver dies (raises) as it submits the tasks of step ``step``."""

    def __init__(self, step: str):
        self.step = step

    def map(self, fn, *iterables, key=None, **kwargs):
        if key and key[0].startswith(f"dedup-{self.step}-"):
            raise KeyboardInterrupt(f"driver killed at {self.step}")
        return super().map(fn, *iterables, **kwargs)


def test_driver_crash_resumes_at_the_unfinished_step(tmp_path):
    """Finished steps are not rerun (their markers' results are used), the output is a fresh run's."""
    docs = _corpus()
    fresh, crashed = tmp_path / "fresh", tmp_path / "crashed"
    _write(fresh, docs)
    _write(crashed, docs)
    want = run_dedup(SyncClient(), str(fresh), CFG)
    all_steps = set(load_stats(str(fresh))["seconds_per_step"])
    with pytest.raises(KeyboardInterrupt):
        run_dedup(_CrashAt("comps_map"), str(crashed), CFG)
    done = sorted(p.stem for p in (crashed / "_dedup_work" / "done").glob("*.json"))
    assert "verify_dst" in done and "comps_map" not in done
    got = run_dedup(SyncClient(), str(crashed), CFG)
    ran = set(load_stats(str(crashed))["seconds_per_step"])
    assert ran == set(STEPS[STEPS.index("comps_map"):]) and ran < all_steps   # resumed at the unfinished step
    assert _outputs(crashed) == _outputs(fresh)
    assert _counts(got) == _counts(want)
    st_fresh, st_crashed = load_stats(str(fresh)), load_stats(str(crashed))
    for k in ("candidate_pairs", "verified_pairs", "near_cluster_sizes", "exact_cluster_sizes", "cc_iterations"):
        assert st_crashed[k] == st_fresh[k], k
    assert st_crashed["files_per_step"] == st_fresh["files_per_step"]


def test_two_runs_on_one_cluster_never_share_task_keys(tmp_path):
    """Same config and sources into two directories: distinct task keys (a shared key would hand
    the second run the first run's results without writing its files)."""
    from datapipe.engine.shuffle_store import Store
    from datapipe.stages.phases.dedup.phase import StepRunner
    from datapipe.stages.phases.dedup.steps import Ctx

    tags = {StepRunner(None, Ctx(Store(str(tmp_path / d)), Store(str(tmp_path)), 1, CFG, 18, 7, "f" * 64), 0).tag
            for d in ("a", "b")}
    assert len(tags) == 2
