"""Edges of a rerun into an existing output. A text-editing stage (c4, pii) or langid taken out
and put back: each rerun equals a fresh run of its manifest. Files in and around the output that
are not the run's own: a user's file whose name looks
like ours, a foreign file in the token folder, a symlinked run folder, an earlier run folder inside
an input folder; and run files deleted by hand, which a rerun repairs (datapipe/engine/plan.py
stale_files / check_own_folders / phase_files, datapipe/io/paths.py resolve_inputs, the phases'
outputs_present). Scenarios start from copies of one fresh run (test_rerun_lineage's helpers)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import test_rerun_lineage as base
from test_rerun_lineage import (
    WARC,
    assert_equals_fresh,
    dry_run,
    manifest,
    start_from,
    tree,
)

from datapipe.cli.main import main as cli_main
from datapipe.engine import runner
from datapipe.engine.plan import PlanError, make_plan
from datapipe.io.paths import resolve_inputs

client, fresh, inputs = base.client, base.fresh, base.inputs   # that module's fixtures, one fresh run


def _cli_dry_run(capsys, man) -> tuple[int, str]:
    capsys.readouterr()
    code = cli_main(["run", str(man.source_file), "--dry-run"])
    got = capsys.readouterr()
    return code, got.out + got.err


# ------------------------------------------------------------------ stages taken out and put back

@pytest.mark.parametrize("name", ["c4", "pii", "langid"])
def test_stage_taken_out_then_put_back_equals_a_fresh_run(client, inputs, fresh, tmp_path, capsys, name):
    """Without c4 a rerun held c4's edits and rejections (159 documents vs 154 fresh) and putting
    it back left 18 files different; without pii masked numbers stayed masked; without langid
    ``lang`` stayed on stored rows."""
    out = start_from(fresh, tmp_path)
    stages = [s for s in manifest(inputs, out).stages if name not in s]
    res = runner.run(manifest(inputs, out, stages=stages), client=client)
    assert {r["retuned_from"] for r in res.tasks} != {None}  # from stored rows
    docs = [r for p in sorted((out / "_filtered").glob("*.parquet")) for r in pq.read_table(p).to_pylist()]
    if name == "langid":
        assert docs and not any(r["lang"] or r["lang_score"] for r in docs)
    else:
        assert not any(r.get(f"text_before_{name}") for r in docs)   # its snapshot column is gone
        assert not [r for r in docs if r.get("reject_stage") == name]
    if name == "c4":   # the figures were for c4: compare with a fresh run without it
        ref = tmp_path / "fresh-without" / "run"
        ref.parent.mkdir()
        runner.run(manifest(inputs, ref, stages=stages), client=client)
        assert_equals_fresh(out, ref)
    base = manifest(inputs, out)
    runner.run(base, client=client)
    assert_equals_fresh(out, fresh)


# ------------------------------------------------------------------ ownership by record

def test_a_user_file_named_like_a_task_shard_is_refused_not_deleted(client, inputs, fresh, tmp_path, capsys):
    out = start_from(fresh, tmp_path)
    thesis = out / "documents" / "thesis-2024abcd.parquet"   # matches <stem>-<8 hex>.parquet
    thesis.write_bytes(b"my thesis")
    tmp = out / "rejected" / "notes.parquet.tmp-draft"
    tmp.write_bytes(b"mine too")
    man = manifest(inputs, out)
    code, text = _cli_dry_run(capsys, man)
    assert code == 2 and "did not write" in text and "documents/thesis-2024abcd.parquet" in text
    with pytest.raises(PlanError, match="thesis-2024abcd"):
        runner.run(man, client=client)
    assert thesis.read_bytes() == b"my thesis" and tmp.read_bytes() == b"mine too"


def test_a_foreign_file_in_the_token_folder_is_refused_and_dry_run_lists_what_is_replaced(
        client, inputs, fresh, tmp_path, capsys):
    out = start_from(fresh, tmp_path)
    man = manifest(inputs, out, **{"tokenize.shard_tokens": 50_000})   # tokenize reruns
    text = dry_run(capsys, man, out)
    index = json.loads((out / "tokens" / "index.json").read_text())
    assert "replaced (removed before the phases that run write them anew)" in text
    for s in index["shards"]:
        assert f"tokens/{s['path']}" in text
    mine = out / "tokens" / "my-notes.txt"
    mine.write_text("keep me")
    code, said = _cli_dry_run(capsys, man)
    assert code == 2 and "tokens/my-notes.txt" in said
    with pytest.raises(PlanError, match="my-notes.txt"):
        runner.run(man, client=client)
    assert mine.read_text() == "keep me" and (out / "tokens" / "index.json").exists()


def test_a_symlinked_run_folder_is_refused_before_any_work(client, inputs, fresh, tmp_path, capsys):
    out = start_from(fresh, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    shutil.move(str(out / "documents"), elsewhere)
    (elsewhere / "precious.txt").write_text("not a shard")
    (out / "documents").symlink_to(elsewhere, target_is_directory=True)
    before = {p.name: p.stat().st_mtime_ns for p in elsewhere.iterdir()}
    man = manifest(inputs, out)
    code, text = _cli_dry_run(capsys, man)
    assert code == 2 and "documents/ is a symbolic link" in " ".join(text.split())
    capsys.readouterr()
    assert cli_main(["run", str(man.source_file)]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert {p.name: p.stat().st_mtime_ns for p in elsewhere.iterdir()} == before


def test_a_run_folder_inside_an_input_folder_is_skipped(inputs, fresh, tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(inputs[0], d / inputs[0].name)
    shutil.copytree(fresh, d / "old-run")          # holds _tasks/, documents/*.parquet, rejected/...
    older = d / "older"                              # a run of records only: ledger.json + _phases/
    (older / "_phases").mkdir(parents=True)
    (older / "ledger.json").write_text("{}")
    shutil.copy(next((fresh / "rejected").glob("*.parquet")), older / "rejected.parquet")
    got = resolve_inputs([str(d)], output=str(tmp_path / "new-out"))
    assert list(got) == [str((d / inputs[0].name).resolve())]
    why = dict(got.skipped)
    assert "a datapipe run folder" in why[str(d / "old-run")] and "a datapipe run folder" in why[str(older)]
    assert not any(p.startswith(str(d / "old-run") + "/") for p, _ in got.skipped)  # listed once, as the folder


# ------------------------------------------------------------------ deleted outputs are repaired

def test_deleted_phase1_shard_and_token_shard_are_repaired(client, inputs, fresh, tmp_path, capsys):
    out = start_from(fresh, tmp_path)
    kept = min((out / "_filtered").glob("*.parquet"))
    kept.unlink()
    shard = max((out / "tokens").glob("shard-*.parquet"))
    shard.unlink()
    base = manifest(inputs, out)
    text = dry_run(capsys, base, out)
    assert f"outputs missing (_filtered/{kept.name})" in text
    assert "run   tokenize: outputs missing" in text
    res = runner.run(base, client=client)
    redone = [r for r in res.tasks if not r.get("skipped")]
    assert [r["task_id"] for r in redone] == [kept.stem]
    assert_equals_fresh(out, fresh)
    assert len(tree(out)) == len(tree(fresh)) and WARC


def test_deleted_export_file_is_repaired(client, inputs, fresh, tmp_path, capsys):
    out = start_from(fresh, tmp_path)
    runner.run(manifest(inputs, out, output_formats=["parquet", "dolma_jsonl"]), client=client)
    files = sorted((out / "dolma").glob("*.jsonl.zst"))
    want = files[0].read_bytes()
    files[0].unlink()
    man = manifest(inputs, out, output_formats=["parquet", "dolma_jsonl"])
    assert "run   dolma_jsonl: outputs missing" in dry_run(capsys, man, out)
    runner.run(man, client=client)
    assert files[0].read_bytes() == want


def test_plan_of_an_untouched_copy_needs_nothing(inputs, fresh, tmp_path):
    out = start_from(fresh, tmp_path)
    m = manifest(inputs, out)
    plan = make_plan(m, resolve_inputs([str(p) for p in inputs], output=str(out)))
    assert {t.action for t in plan.tasks} == {"skip"} and {p.action for p in plan.phases} == {"skip"}
    assert plan.stale == [] and plan.replaced == []
    assert Path(out).exists()
