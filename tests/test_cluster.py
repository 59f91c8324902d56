"""The main job on an existing Dask cluster (``dask scheduler`` + two ``dask worker`` processes on
127.0.0.1, started as subprocesses) equals a LocalCluster run; shards are byte-identical across
1 worker (a LocalCluster of its own), 2 workers (conftest's warm one) and the external cluster
(three separate runs)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from scale_helpers import (
    KINDS,
    MANIFEST,
    SMALL,
    ExternalCluster,
    assert_same_output,
    file_bytes,
    run_local,
    stage_counts,
    warcio_record_counts,
)

CLI = [sys.executable, "-m", "datapipe.cli.main"]


def cli_run(inputs_dir, out, *extra, cwd):
    r = subprocess.run(CLI + ["run", str(MANIFEST), "--input", str(inputs_dir), "--output", str(out),
                              "--no-progress", *extra], capture_output=True, text=True, timeout=600, cwd=cwd)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def _sample(data_dir, tmp, names):
    d = tmp / "warc"
    d.mkdir()
    for n in names:
        shutil.copy(data_dir / "warc" / n, d / n)
    return d


def _check_external_equals_local(data_dir, tmp, names, warm_client):
    inputs = _sample(data_dir, tmp, names)
    files = sorted(inputs.iterdir())
    client_cwd = tmp / "client"
    client_cwd.mkdir()
    with ExternalCluster(tmp / "cluster", n_workers=2) as cluster:
        r = cli_run(inputs, tmp / "external", "--scheduler", cluster.address, cwd=client_cwd)
        assert "Dask dashboard" in r.stdout
        from distributed import Client

        with Client(cluster.address) as c:  # the work ran on the two external workers
            assert len(c.scheduler_info()["workers"]) == 2
    local2 = run_local(files, tmp / "local2", client=warm_client)  # conftest's: 2 workers
    local1 = run_local(files, tmp / "local1", workers=1)  # a LocalCluster of its own
    ext = json.loads((tmp / "external" / "ledger.json").read_text())
    # Row sets and checksums equal; then the stronger property: byte-identical shard files.
    assert_same_output(tmp / "external", tmp / "local2")
    for kind in KINDS:
        assert file_bytes(tmp / "external", kind) == file_bytes(tmp / "local2", kind) == \
            file_bytes(tmp / "local1", kind), kind
    assert file_bytes(tmp / "external", "documents")  # not vacuous
    assert stage_counts(ext) == stage_counts(local2.ledger.to_dict()) == stage_counts(local1.ledger.to_dict())
    # Every record of every input accounted for (counted independently with warcio, where it can
    # read the file: it stops at the cut member of resiliparse_clipped).
    per_task = {t["input"].rsplit("/", 1)[-1]: t["ledger"]["stages"]["read"]["in"] for t in local2.tasks}
    for f in files:
        if f.name != "resiliparse_clipped.warc.gz":
            assert per_task[f.name] == sum(warcio_record_counts(f).values()), f.name


@pytest.mark.slow  # make test-slow: a long fault/figure run (make test stays near 15 min)
def test_external_cluster_equals_local_cluster(data_dir, tmp_path, warm_client):
    """The real WARC sample without its one 34 MB file (that one is in the slow variant)."""
    _check_external_equals_local(data_dir, tmp_path, SMALL, warm_client)


@pytest.mark.slow
def test_external_cluster_equals_local_cluster_full_sample(data_dir, tmp_path, warm_client):
    names = sorted(p.name for p in (data_dir / "warc").iterdir() if p.name.endswith(".gz"))
    _check_external_equals_local(data_dir, tmp_path, names, warm_client)


def test_scheduler_unreachable_is_a_clear_error(tmp_path, data_dir):
    from scale_helpers import free_port

    r = subprocess.run(CLI + ["run", str(MANIFEST), "--input", str(data_dir / "warc" / SMALL[0]), "--output",
                              str(tmp_path / "o"), "--scheduler", f"tcp://127.0.0.1:{free_port()}", "--no-progress"],
                       capture_output=True, text=True, timeout=120,
                       env={**__import__("os").environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "3s"})
    assert r.returncode != 0
    assert "127.0.0.1" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert not (tmp_path / "o" / "documents").exists()
