"""``inspect --where`` is user SQL run by DuckDB: it reads the run's shards and nothing else (no
other file, no writes, no settings changed back; datapipe.inspect.reader.Run.connect)."""
from __future__ import annotations

import json
import os

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datapipe.cli import main as cli
from datapipe.inspect import reader as I

ROWS = {"id": ["a", "b", "c"], "url": ["u1", "u2", "u3"], "lang": ["de", "en", "de"],
        "lang_score": [0.9, 0.8, 0.7], "text": ["x", "y", "z"]}


@pytest.fixture
def run_dir(tmp_path):
    run = tmp_path / "run"
    (run / "documents").mkdir(parents=True)
    pq.write_table(pa.table(ROWS), run / "documents" / "part-0.parquet")
    (run / "ledger.json").write_text(json.dumps({"stages": {}}))
    (tmp_path / "secret.txt").write_text("s3cr3t\n")
    return run


ATTACKS = ["(SELECT count(*) FROM read_text('{secret}')) > 0",
           "(SELECT content FROM read_text('{secret}')) LIKE 's3cr3t%'",
           "(SELECT count(*) FROM read_csv('/etc/passwd')) > 0",
           "(SELECT count(*) FROM glob('{root}/*')) > 0",
           "(SELECT count(*) FROM read_parquet('{run}/documents/../../secret.txt')) > 0"]


@pytest.mark.parametrize("attack", ATTACKS)
def test_where_cannot_read_other_files(run_dir, capsys, attack):
    expr = attack.format(secret=run_dir.parent / "secret.txt", root=run_dir.parent, run=run_dir)
    assert cli.main(["inspect", str(run_dir), "--kept", "--where", expr, "--json"]) == 2
    err = capsys.readouterr().err
    assert "bad --where expression" in err and "s3cr3t" not in err.replace(expr, "")


def test_the_lock_cannot_be_lifted_from_a_query(run_dir):
    con = I.Run.open(str(run_dir)).connect()
    for sql in ("SET enable_external_access = true", "SET lock_configuration = false",
                "SET allowed_directories = ['/']"):
        with pytest.raises(Exception, match="configuration"):
            con.execute(sql)
    with pytest.raises(Exception, match="Permission"):
        con.execute(f"COPY (SELECT 1) TO '{run_dir.parent / 'written.csv'}'")
    assert not (run_dir.parent / "written.csv").exists()


def test_where_still_reads_the_shards(run_dir, monkeypatch):
    monkeypatch.chdir(run_dir.parent)   # a relative run path too
    for url in (str(run_dir), "run"):
        res = I.where(I.Run.open(url), "kept", "lang = 'de' AND lang_score > 0.75")
        assert res["count"] == 1 and [r["id"] for r in res["rows"]] == ["a"]


def test_a_remote_run_reads_its_shards_only():
    fs = fsspec.filesystem("memory")
    with fs.open("memory://sandboxed/run/documents/part-0.parquet", "wb") as fh:
        pq.write_table(pa.table(ROWS), fh)
    with fs.open("memory://sandboxed/run/ledger.json", "w") as fh:
        fh.write(json.dumps({"stages": {}}))
    with fs.open("memory://sandboxed/other.parquet", "wb") as fh:
        pq.write_table(pa.table({"x": [1]}), fh)
    run = I.Run.open("memory://sandboxed/run")
    assert I.where(run, "kept", "lang = 'de'")["count"] == 2
    with pytest.raises(I.InspectError, match="Permission"):
        I.where(run, "kept", "(SELECT count(*) FROM read_parquet('memory://sandboxed/other.parquet')) > 0")
    assert os.path.exists("/etc/hostname")  # the local files stay shut too
    with pytest.raises(I.InspectError, match="Permission"):
        I.where(run, "kept", "(SELECT count(*) FROM read_text('/etc/hostname')) > 0")
