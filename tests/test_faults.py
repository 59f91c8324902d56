"""Faults that must lose nothing: a worker SIGKILLed mid-task, corrupt inputs, an output that
cannot be written or fills up, an oversized page. Every case ends with a balanced ledger."""
from __future__ import annotations

import errno
import gzip
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

import fsspec
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.memory import MemoryFile, MemoryFileSystem
from scale_helpers import (
    KINDS,
    MANIFEST,
    ExternalCluster,
    assert_same_output,
    manifest_for,
    run_local,
    stage_counts,
)

from datapipe.engine import runner
from datapipe.engine.ledger import Ledger

CLI = [sys.executable, "-m", "datapipe.cli.main"]


def _record_offsets(path):
    from warcio.archiveiterator import ArchiveIterator

    with open(path, "rb") as fh:
        it = ArchiveIterator(fh)
        return [it.get_record_offset() for _ in it]


def _first_records(src, n, dest):
    """The first ``n`` records of a per-record-gzip WARC, byte for byte (a valid, smaller WARC)."""
    offs = _record_offsets(src)
    dest.write_bytes(src.read_bytes()[: offs[n]])
    return dest


def _ledger(out):
    led = json.loads((out / "ledger.json").read_text())
    Ledger.from_dict(led).check()
    return led


def _assert_rows_match_ledger(out, led):
    n = {k: sum(pq.read_metadata(f).num_rows for f in (out / k).glob("*.parquet")) for k in KINDS}
    assert n["documents"] == Ledger.from_dict(led).kept
    assert n["errors"] == sum(sum(st["errored"].values()) for st in led["stages"].values())


# ------------------------------------------------------------------ a worker killed mid-task

def test_worker_sigkill_mid_task_loses_nothing(data_dir, tmp_path, warm_client):
    inputs = tmp_path / "in"
    inputs.mkdir()
    _first_records(data_dir / "warc" / "realpages-1171.warc.gz", 200, inputs / "realpages-200.warc.gz")
    for n in ("whirlwind_CC-MAIN-2024-22.warc.gz", "dolma_wget_sample-0001.warc.gz"):
        shutil.copy(data_dir / "warc" / n, inputs / n)
    files = sorted(inputs.iterdir())
    ref = run_local(files, tmp_path / "ref", client=warm_client, batch_size=32)  # the kill is on the external cluster

    out = tmp_path / "killed"
    from distributed import Client

    with ExternalCluster(tmp_path / "cluster", n_workers=2) as cluster, Client(cluster.address) as c:
        from datapipe.engine.task import PROGRESS_TOPIC

        m = manifest_for(files, out, **{"cluster.address": cluster.address, "batch_size": 32})
        box = {}
        records: dict[str, int] = {}  # task -> records read so far (progress events of running tasks)
        c.subscribe_topic(PROGRESS_TOPIC, lambda ev: "records" in ev[1]
                          and records.__setitem__(ev[1]["task"], ev[1]["records"]))
        th = threading.Thread(target=lambda: box.update(res=runner.run(m, [str(f) for f in files])), daemon=True)
        th.start()
        victim = None
        deadline = time.time() + 120
        while time.time() < deadline and victim is None:
            partial = [t for t, n in list(records.items()) if t.startswith("realpages-200") and 0 < n < 200]
            if partial:  # the long task has read part of its file: it is mid-way
                for addr, keys in c.processing().items():
                    if any("realpages-200" in str(k) for k in keys):
                        victim = addr
            time.sleep(0.05)
        assert victim, "the long task was never seen mid-way"
        pid = c.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)
        killed_at = time.time()
        th.join(timeout=300)
        assert not th.is_alive(), cluster.log_text()
        assert "res" in box, cluster.log_text()
        # The nanny restarted the killed process: two workers again, the victim's pid gone.
        c.wait_for_workers(2, timeout=60)
        pids = set(c.run(os.getpid).values())
        assert pid not in pids
    res = box["res"]
    assert time.time() - killed_at < 300
    assert_same_output(out, tmp_path / "ref")
    for kind in KINDS:  # same bytes too, not only the same rows
        assert sorted(p.name for p in (out / kind).glob("*.parquet")) == \
            sorted(p.name for p in (tmp_path / "ref" / kind).glob("*.parquet"))
    led = _ledger(out)
    assert stage_counts(led) == stage_counts(ref.ledger.to_dict())
    assert led["stages"]["read"]["in"] == sum(len(_record_offsets(f)) for f in files)
    _assert_rows_match_ledger(out, led)
    assert not list(out.rglob("*.tmp-*"))  # the dead attempt's partial shard was removed
    assert len(res.tasks) == len(files)


# ------------------------------------------------------------------ corrupt inputs

def test_corrupt_inputs_are_accounted_for(data_dir, tmp_path, warm_client):
    src = data_dir / "warc" / "dolma_wget_sample-0000.warc.gz"
    offs = _record_offsets(src)
    inputs = tmp_path / "in"
    inputs.mkdir()
    cut = offs[5] + (offs[6] - offs[5]) // 2          # in the middle of the 6th record's gzip member
    (inputs / "truncated.warc.gz").write_bytes(src.read_bytes()[:cut])
    (inputs / "garbage.warc.gz").write_bytes(random.Random(8).randbytes(50_000))
    (inputs / "empty.warc.gz").write_bytes(b"")
    (inputs / "notwarc.warc.gz").write_bytes(gzip.compress(b"<html><body>" + b"hello world " * 5000 + b"</body></html>"))
    (inputs / "plain.warc").write_bytes(b"id,name\n1,a\n2,b\n" * 1000)
    shutil.copy(data_dir / "warc" / "whirlwind_CC-MAIN-2024-22.warc.gz", inputs / "good.warc.gz")
    out = tmp_path / "out"
    res = run_local(sorted(inputs.iterdir()), out, client=warm_client)
    led = _ledger(out)
    _assert_rows_match_ledger(out, led)
    by_file = {t["input"].rsplit("/", 1)[-1]: t["ledger"]["stages"]["read"] for t in res.tasks}
    assert set(by_file) == {p.name for p in inputs.iterdir()}  # every file has its success record
    # truncated: the 5 whole records read as before, the cut one errored with a read:* reason.
    t = by_file["truncated.warc.gz"]
    assert t["in"] == 6 and sum(t["errored"].values()) == 1 and all(k.startswith("read:") for k in t["errored"])
    # a zero-byte input is one errored record with its reason, so the ledger names it (issue 14)
    assert by_file["empty.warc.gz"]["in"] == 1 and list(by_file["empty.warc.gz"]["errored"]) == ["read:empty_file"]
    for name in ("garbage.warc.gz", "notwarc.warc.gz", "plain.warc"):
        st = by_file[name]
        assert st["kept"] == 0, name  # nothing in them is a document
        assert st["in"] == sum(st["rejected"].values()) + sum(st["errored"].values())
        assert st["in"] >= 1 and all(k.startswith("read:") for k in st["errored"]), (name, st)
    errs = pq.read_table(out / "errors").to_pylist()
    assert {e["warc_file"] for e in errs} >= {"truncated.warc.gz", "garbage.warc.gz", "notwarc.warc.gz", "plain.warc"}
    good = by_file["good.warc.gz"]
    assert good["in"] == len(_record_offsets(inputs / "good.warc.gz")) and not good["errored"]


# ------------------------------------------------------------------ output not writable / full

def test_output_not_writable_is_a_clear_error(data_dir, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    r = subprocess.run(CLI + ["run", str(MANIFEST), "--input", str(data_dir / "warc" / "whirlwind_CC-MAIN-2024-22.warc.gz"),
                              "--output", str(blocker / "out"), "--workers", "1", "--no-progress"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "output" in r.stderr and str(blocker / "out") in r.stderr.replace("\n", "") and "Traceback" not in r.stderr


class FullFS(MemoryFileSystem):
    """An in-memory filesystem that runs out of space after ``LIMIT`` bytes written."""

    protocol = "fullmem"
    LIMIT = 40_000
    written = 0

    def _open(self, path, mode="rb", **kw):
        f = super()._open(path, mode, **kw)
        if "w" in mode:
            fs = type(self)

            class _Full(MemoryFile):
                def write(self, data):
                    fs.written += len(data)
                    if fs.written > fs.LIMIT:
                        raise OSError(errno.ENOSPC, "No space left on device")
                    return super().write(data)
            f.__class__ = _Full
        return f


def test_full_output_leaves_no_partial_shard(data_dir):
    from datapipe.engine.task import run_file_task
    from datapipe.engine.task_plan import TaskSpec, chain_fingerprint, task_id_for

    fsspec.register_implementation("fullmem", FullFS, clobber=True)
    fs = FullFS()
    FullFS.written = 0
    m = manifest_for([], "fullmem://run", **{"inputs.paths": ["x"]})
    stages = m.effective_stages() if hasattr(m, "effective_stages") else m.stages
    src = str(data_dir / "warc" / "dolma_wget_sample-0000.warc.gz")
    spec = TaskSpec(task_id_for(src), src, "fullmem://run", stages, chain_fingerprint(stages), batch_size=16)
    with pytest.raises(OSError) as ei:
        run_file_task(spec)
    assert ei.value.errno == errno.ENOSPC or "No space left" in str(ei.value)
    left = fs.find("/run")
    assert FullFS.written > FullFS.LIMIT  # the limit was really hit
    assert not [p for p in left if p.endswith(".parquet") or p.endswith(".json")], left  # no final names
    assert not [p for p in left if ".tmp-" in p], left


# ------------------------------------------------------------------ an oversized page

@pytest.mark.slow
def test_200mb_html_payload_is_rejected_with_bounded_memory(tmp_path):
    import io

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    path = tmp_path / "huge.warc.gz"
    body = b"<html><body>" + b"<p>" + b"big page " * (200_000_000 // 9) + b"</p></body></html>"
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=True)
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
        w.write_record(w.create_warc_record("http://example.com/huge", "response", payload=io.BytesIO(body),
                                            http_headers=http))
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
        w.write_record(w.create_warc_record("http://example.com/small", "response",
                                            payload=io.BytesIO(b"<html><body><p>" + b"A small page. " * 40 + b"</p></body></html>"),
                                            http_headers=http))
    del body
    out = tmp_path / "out"
    res = run_local([path], out, workers=1, **{"cluster.memory_limit": "3GiB"})
    led = _ledger(out)
    assert led["stages"]["read"]["in"] == 2
    rej = pq.read_table(out / "rejected").to_pylist()
    assert [r["reject_reason"] for r in rej if r["url"] == "http://example.com/huge"] == ["extract:too_large"]
    assert res.tasks[0]["ledger"]["stages"]["read"]["in"] == 2
