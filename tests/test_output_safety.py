"""Who may write an output directory, what counts as an input, and the end-of-run invariant (issue 13)."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datapipe.engine.lock import LOCK_NAME, OutputLock, OutputLockedError, read_lock
from datapipe.io.paths import (
    InputError,
    canonical_input,
    has_input_extension,
    resolve_inputs,
)

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


# ------------------------------------------------------------------ input identity and expansion

def test_canonical_input_collapses_spellings(tmp_path, monkeypatch):
    f = tmp_path / "a.warc.gz"
    f.write_bytes(b"x")
    link = tmp_path / "l.warc.gz"
    os.symlink(f, link)
    monkeypatch.chdir(tmp_path)
    assert {canonical_input(p) for p in ["a.warc.gz", "./a.warc.gz", str(f), str(link), f"file://{f}",
                                         str(tmp_path / "sub" / ".." / "a.warc.gz")]} == {str(f.resolve())}
    assert canonical_input("HTTPS://Data.CommonCrawl.org:443//crawl-data//x.warc.gz") == \
        "https://data.commoncrawl.org/crawl-data/x.warc.gz"
    assert canonical_input("http://h:8080/a") == "http://h:8080/a"


@pytest.mark.parametrize("name, ok", [("x.warc.gz", True), ("x.warc", True), ("x.arc.gz", True), ("x.wet.gz", True),
                                      ("x.jsonl.zst", True), ("x.json.gz", True), ("x.parquet", True),
                                      ("ledger.json", True), ("report.html", False), ("x.txt", False),
                                      ("README", False), ("x.gz", False), ("x.warc.zstd", True)])
def test_input_extensions(name, ok):
    assert has_input_extension(name) is ok


def test_directory_expansion_skips_and_lists(tmp_path):
    d = tmp_path / "in"
    (d / "sub").mkdir(parents=True)
    (d / ".hidden").mkdir()
    for n in ["a.warc.gz", "sub/b.jsonl", ".dot.warc.gz", ".hidden/c.warc.gz", "notes.txt", "x.html"]:
        (d / n).write_bytes(b"x")
    got = resolve_inputs([str(d)])
    assert [Path(p).name for p in got] == ["a.warc.gz", "b.jsonl"]
    assert sorted(Path(p).name for p, _ in got.skipped) == [".dot.warc.gz", "c.warc.gz", "notes.txt", "x.html"]
    assert {why for _, why in got.skipped} == {"hidden file", "not an input extension (warc, arc, wet, wat, jsonl, json, ndjson, parquet)"}


def test_output_inside_input_is_excluded_or_refused(tmp_path):
    d = tmp_path / "in"
    (d / "out" / "documents").mkdir(parents=True)
    (d / "a.warc.gz").write_bytes(b"x")
    (d / "out" / "documents" / "t.parquet").write_bytes(b"x")
    (d / "out" / "ledger.json").write_text("{}")
    got = resolve_inputs([str(d)], output=str(d / "out"))
    assert [Path(p).name for p in got] == ["a.warc.gz"]
    assert {why for _, why in got.skipped} == {"inside the output directory"} and len(got.skipped) == 2
    with pytest.raises(InputError, match="inside the output directory"):
        resolve_inputs([str(d / "out" / "ledger.json")], output=str(d / "out"))
    got = resolve_inputs([str(d / "*.warc.gz"), str(d / "out" / "*" / "*.parquet")], output=str(d / "out"))
    assert [Path(p).name for p in got] == ["a.warc.gz"]


# ------------------------------------------------------------------ the output lock

def test_lock_refuses_a_second_holder_and_names_the_first(tmp_path):
    with OutputLock(str(tmp_path)):
        holder = read_lock(str(tmp_path))
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        with pytest.raises(OutputLockedError) as ei:
            OutputLock(str(tmp_path)).acquire()
        assert f"is in use by pid {os.getpid()} on {socket.gethostname()} since " in str(ei.value)
    assert read_lock(str(tmp_path)) is None  # released


def test_stale_lock_of_a_dead_process_is_taken_over(tmp_path, caplog):
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()  # a pid that no longer runs
    (tmp_path / LOCK_NAME).write_text(json.dumps({"host": socket.gethostname(), "pid": p.pid, "since": time.time(),
                                                  "heartbeat": time.time(), "token": "old"}))
    with caplog.at_level("WARNING", logger="datapipe"):
        with OutputLock(str(tmp_path)):
            assert read_lock(str(tmp_path))["pid"] == os.getpid()
    assert "taking over a stale lock" in caplog.text


def test_lock_of_another_host_is_stale_only_after_its_lease(tmp_path):
    rec = {"host": "elsewhere", "pid": 1, "since": time.time(), "heartbeat": time.time(), "token": "x"}
    (tmp_path / LOCK_NAME).write_text(json.dumps(rec))
    with pytest.raises(OutputLockedError, match="in use by pid 1 on elsewhere"):
        OutputLock(str(tmp_path)).acquire()
    rec["heartbeat"] = time.time() - 3600
    (tmp_path / LOCK_NAME).write_text(json.dumps(rec))
    with OutputLock(str(tmp_path)):
        pass


def _cli(args, **kw):
    return subprocess.Popen([str(BIN / "datapipe"), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO, **kw)


def _small_manifest(tmp_path: Path, data_dir: Path, out: Path) -> Path:
    import yaml

    data = yaml.safe_load((REPO / "manifests" / "cc-2026.yaml").read_text())
    data["inputs"] = {"paths": [str(data_dir / "warc" / "dolma_wget_sample-0000.warc.gz")]}
    data["output"] = str(out)
    data["cluster"] = {"workers": 1, "dashboard_address": "127.0.0.1:0"}
    data["report"] = {"enabled": False}
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.slow  # make test-slow: a long fault/figure run (make test stays near 15 min)
def test_two_concurrent_runs_second_refuses_first_unaffected(tmp_path, data_dir, warm_client):
    out = tmp_path / "out"
    man = _small_manifest(tmp_path, data_dir, out)
    first = _cli(["run", str(man), "--no-progress"])
    deadline = time.time() + 120
    while not (out / LOCK_NAME).exists():
        assert first.poll() is None, first.communicate()
        assert time.time() < deadline
        time.sleep(0.05)
    second = _cli(["run", str(man), "--no-progress"])
    _, err2 = second.communicate(timeout=120)
    assert second.returncode == 2, err2
    assert f"{out} is in use by pid {first.pid} on {socket.gethostname()} since" in " ".join(err2.split())
    out1, err1 = first.communicate(timeout=300)
    assert first.returncode == 0, err1
    # the first run's output is that of a run alone (made in this process, on conftest's warm cluster)
    from datapipe.engine import runner
    from datapipe.manifest.load import load_manifest

    fresh = tmp_path / "fresh"
    (tmp_path / "f").mkdir()
    runner.run(load_manifest(_small_manifest(tmp_path / "f", data_dir, fresh)), client=warm_client)
    for kind in ("documents", "rejected", "tokens"):
        a = {f.name: f.read_bytes() for f in (out / kind).glob("*") if f.is_file()}
        b = {f.name: f.read_bytes() for f in (fresh / kind).glob("*") if f.is_file()}
        assert a == b and a, kind
    assert not (out / LOCK_NAME).exists()


# ------------------------------------------------------------------ the end-of-run invariant

def test_invariant_names_the_file_and_count(tmp_path):
    from verify_util import one_task_run

    from datapipe.engine.verify import verify_run
    from datapipe.stages.phases.dedup.phase import DedupPhase

    DEDUP_CHAIN = [(DedupPhase, "_filtered", "documents")]
    from datapipe.engine.ledger import InvariantError

    t, led, rec = one_task_run(tmp_path)
    assert verify_run(str(tmp_path), None, led, rec, DEDUP_CHAIN)["documents"] == 2
    pq.write_table(t.slice(0, 1), tmp_path / "documents" / "t1.parquet")  # a row lost after the ledger
    with pytest.raises(InvariantError, match="documents/ holds 1 rows but the ledger's final kept is 2"):
        verify_run(str(tmp_path), None, led, rec, DEDUP_CHAIN)
    pq.write_table(t, tmp_path / "documents" / "t1.parquet")
    (tmp_path / "rejected").mkdir()
    pq.write_table(t.slice(1, 1), tmp_path / "rejected" / "dedup-t1.parquet")
    with pytest.raises(InvariantError, match="record.s. are both kept and rejected"):
        verify_run(str(tmp_path), None, led, rec, DEDUP_CHAIN)
    shutil.rmtree(tmp_path / "rejected")
    pq.write_table(t, tmp_path / "documents" / "stale-t0.parquet")
    with pytest.raises(InvariantError, match="of no input of this run"):
        verify_run(str(tmp_path), None, led, rec, DEDUP_CHAIN)


# ------------------------------------------------------------------ stage errors keep their story

def test_stage_exception_keeps_message_and_errors_only_its_batch(tmp_path, caplog):
    from datapipe.engine.ledger import Ledger
    from datapipe.engine.task import TaskOutputs, rows_to_table, run_stages
    from datapipe.engine.task_plan import TaskSpec
    from datapipe.formats.documents import document_schema
    from datapipe.stage import Stage

    class Boom(Stage):
        name = "boom"

        def __call__(self, batch):
            raise ValueError("the model file is truncated at byte 1234 " + "x" * 1000)

    st = Boom()
    schema = document_schema([st])
    spec = TaskSpec("t", "in.warc.gz", str(tmp_path), [], "fp")
    out = TaskOutputs(spec, schema)
    led = Ledger()
    table = rows_to_table([{"id": str(i), "text": "t", "warc_offset": i} for i in range(3)], schema)
    logged: set = set()
    with caplog.at_level("ERROR", logger="datapipe"):
        for _ in range(2):  # two batches: the traceback is logged once
            kept = run_stages(table, [st], 0, led, out, logged)
    assert kept.num_rows == 0
    assert led.stages["boom"].errored == {"boom:exception:ValueError": 6}
    errs = pa.concat_tables(out.parts["errors"]).to_pylist()
    assert len(errs) == 6 and {e["error_stage"] for e in errs} == {"boom"}
    assert errs[0]["error_reason"].startswith("boom:exception:ValueError: the model file is truncated at byte 1234")
    assert len(errs[0]["error_reason"]) < 400
    assert caplog.text.count("stage boom failed") == 1 and "Traceback" in caplog.text


def test_zero_byte_input_is_named_at_the_end(tmp_path, data_dir):
    """A zero-byte input is one errored ledger row (read:empty_file) and the run names it (issue 14)."""
    import yaml

    empty = tmp_path / "empty.warc.gz"
    empty.write_bytes(b"")
    data = yaml.safe_load((REPO / "manifests" / "cc-2026.yaml").read_text())
    data["inputs"] = {"paths": [str(empty), str(data_dir / "warc" / "dolma_wget_sample-0000.warc.gz")]}
    data.update(output=str(tmp_path / "out"), cluster={"workers": 1, "dashboard_address": "127.0.0.1:0"},
                report={"enabled": False})
    man = tmp_path / "m.yaml"
    man.write_text(yaml.safe_dump(data))
    p = _cli(["run", str(man), "--no-progress"])
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert "1 input file(s) gave no record" in err and f"{empty}: read:empty_file 1" in " ".join(err.split())
    led = json.loads((tmp_path / "out" / "ledger.json").read_text())
    assert led["stages"]["read"]["errored"].get("read:empty_file") == 1


def test_files_datapipe_did_not_write_are_never_removed(tmp_path, data_dir):
    """An existing directory given as the output: a rerun removes the stale shards of inputs no
    longer in the manifest, but a file datapipe did not name (a user's) stops the run before
    anything is removed (before, ``documents/notes.txt`` was deleted without a word)."""
    import yaml

    from datapipe.cli.main import main as cli_main
    from datapipe.engine.plan import PlanError, stale_files

    out = tmp_path / "out"
    for d in ("documents", "errors", "rejected"):
        (out / d).mkdir(parents=True)
    (out / "_tasks").mkdir()
    ours = [out / "documents" / "gone-0123abcd.parquet", out / "rejected" / "dedup-gone-0123abcd-p00001.parquet",
            out / "errors" / "gone-0123abcd.parquet.tmp-1f2e", out / "_tasks" / "gone-0123abcd.json",
            out / "_tasks" / "gone-0123abcd-p00001.json"]
    for p in ours:
        p.write_bytes(b"x")
    # records last: a run killed while removing them still knows the rest was its own
    assert stale_files(str(out), None, {"kept-89abcdef"}) == [str(ours[i]) for i in (0, 1, 2, 4, 3)]
    mine = [out / "documents" / "notes.txt", out / "errors" / "thesis_data.parquet"]
    for p in mine:
        p.write_text("mine")
    with pytest.raises(PlanError, match=r"holds 2 file\(s\) that datapipe did not write .*documents/notes\.txt"):
        stale_files(str(out), None, set())
    man = tmp_path / "m.yaml"
    man.write_text(yaml.safe_dump({"inputs": {"paths": [str(data_dir / "warc" / "whirlwind_CC-MAIN-2024-22.warc.gz")]},
                                   "output": str(out), "stages": [{"extract": {}}]}))
    assert cli_main(["run", str(man), "--dry-run"]) == 2
    assert all(p.exists() for p in mine + ours)


def test_killed_writers_markers_and_ledger_are_stale(tmp_path):
    """A run killed while writing a phase marker or the ledger leaves ``<name>.tmp-<hex>`` (seen
    after kill -9 in phase 3: ``_phases/tokenize.json.tmp-6aba0972``); the next run removes it."""
    from datapipe.engine.plan import stale_files

    out = tmp_path / "out"
    (out / "_phases").mkdir(parents=True)
    left = [out / "_phases" / "tokenize.json.tmp-6aba0972", out / "ledger.json.tmp-1f2e3d4c"]
    for p in left + [out / "_phases" / "tokenize.json", out / "ledger.json"]:
        p.write_text("{}")
    assert stale_files(str(out), None, set()) == sorted(str(p) for p in left)


def test_dry_run_names_an_output_it_could_not_write(tmp_path, data_dir, capsys):
    """``--dry-run`` writes nothing, but an output that is a file (or lies under one) is an error
    there as in the real run (exit 2 naming it), not a plan that the run then refuses."""
    import yaml

    from datapipe.cli.main import main as cli_main

    warc = str(data_dir / "warc" / "whirlwind_CC-MAIN-2024-22.warc.gz")
    afile = tmp_path / "out.txt"
    afile.write_text("not a folder")
    for out, says in ((afile, "is a file, not a folder"), (afile / "sub", f"{afile} is a file")):
        man = tmp_path / "m.yaml"
        man.write_text(yaml.safe_dump({"inputs": {"paths": [warc]}, "output": str(out), "stages": [{"extract": {}}]}))
        assert cli_main(["run", str(man), "--dry-run"]) == 2
        assert says in capsys.readouterr().err.replace("\n", "")
        assert cli_main(["run", str(man)]) == 2  # the real run refuses it too
        capsys.readouterr()
    assert afile.read_text() == "not a folder"
    good = tmp_path / "new" / "out"
    man.write_text(yaml.safe_dump({"inputs": {"paths": [warc]}, "output": str(good), "stages": [{"extract": {}}]}))
    assert cli_main(["run", str(man), "--dry-run"]) == 0
    assert not (tmp_path / "new").exists()  # nothing written
