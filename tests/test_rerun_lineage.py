"""A rerun equals a fresh run (issue 13): whatever changed between two runs into one output
directory, the outputs are byte-identical to a fresh run of the final manifest into an empty one.

Every scenario starts from a copy of the base run's directory, reruns it with a changed manifest
(the "before" state), then reruns the base manifest over it and compares every shard file,
``tokens/`` (index included) and the ledger's counts with the base run made fresh. Both
directions are reruns into an existing directory. One LocalCluster (conftest's warm_client)
serves the whole module.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from scale_helpers import MANIFEST, stage_counts

from datapipe.cli.main import main as cli_main
from datapipe.engine import runner
from datapipe.manifest.load import _set, load_manifest

WARC = ["dolma_wget_sample-0000.warc.gz", "resiliparse_CC-MAIN-2020-34_excerpt.warc.gz",
        "whirlwind_CC-MAIN-2024-22.warc.gz"]
COMPARED = ("documents", "rejected", "errors", "_filtered", "tokens")
BASE = {"report.enabled": False, "dedup.minhash.threshold": 0.7}


@pytest.fixture(scope="module")
def client(warm_client):
    return warm_client


@pytest.fixture(scope="module")
def inputs(data_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    for n in WARC:
        shutil.copy(data_dir / "warc" / n, d / n)  # a private copy: tests rename and touch them
    return [d / n for n in WARC]


def manifest(inputs, out, **overrides):
    """The main manifest with ``overrides``, written to a YAML file beside ``out`` (so the CLI's
    ``--dry-run`` reads exactly what the runner ran)."""
    data = yaml.safe_load(MANIFEST.read_text())
    ov = {"inputs.paths": [str(p) for p in inputs], "inputs.crawl": None, "output": str(out),
          "cluster.dashboard_address": "127.0.0.1:0", **BASE, **overrides}
    for k, v in ov.items():
        _set(data, k, v)
    text = yaml.safe_dump(data, sort_keys=False)
    path = Path(out).parent / f"manifest-{hashlib.sha1(text.encode()).hexdigest()[:10]}.yaml"
    path.write_text(text)
    return load_manifest(path)


def tree(out: Path) -> dict[str, str]:
    """sha256 of every compared file, by path relative to the run directory."""
    h = {}
    for kind in COMPARED:
        for f in sorted((Path(out) / kind).glob("*")):
            if f.is_file():
                h[f"{kind}/{f.name}"] = hashlib.sha256(f.read_bytes()).hexdigest()
    return h


def ledger_counts(out: Path) -> dict:
    led = json.loads((Path(out) / "ledger.json").read_text())
    return {"stages": stage_counts(led), "totals": led["totals"], "by_type": led["records_by_type"]}


@pytest.fixture(scope="module")
def fresh(client, inputs, tmp_path_factory):
    """The base manifest run once into an empty directory: the reference of every scenario."""
    out = tmp_path_factory.mktemp("fresh") / "run"
    res = runner.run(manifest(inputs, out), client=client)
    assert res.ledger.kept > 0 and tree(out)
    return out


def start_from(fresh: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(fresh, out)
    return out


def assert_equals_fresh(out: Path, fresh: Path) -> None:
    a, b = tree(out), tree(fresh)
    assert sorted(a) == sorted(b)
    assert [k for k in a if a[k] != b[k]] == []
    assert ledger_counts(out) == ledger_counts(fresh)


def dry_run(capsys, man, out: Path, *extra) -> str:
    """``datapipe run --dry-run`` through the CLI; asserts it wrote nothing."""
    before = {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in out.rglob("*")} if out.exists() else {}
    capsys.readouterr()
    code = cli_main(["run", str(man.source_file), "--dry-run", *extra])
    text = capsys.readouterr().out
    assert code == 0, text
    after = {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in out.rglob("*")} if out.exists() else {}
    assert after == before
    return text


def by_task(res) -> dict[str, dict]:
    return {Path(r["input"]).name: r for r in res.tasks}


# ------------------------------------------------------------------ phase-1 changes

@pytest.mark.parametrize("change, stage, index", [
    ({"stages[1].langid.min_score": 0.8}, "langid", 1),           # early stage
    ({"stages[8].quality_classifier.threshold": 0.3}, "quality_classifier", 8),  # late stage, after c4's edits
], ids=["early-threshold", "late-threshold"])
def test_threshold_change_reruns_from_that_stage(client, inputs, fresh, tmp_path, capsys, change, stage, index):
    out = start_from(fresh, tmp_path)
    changed = _with_stage_option(inputs, out, stage, change)
    res = runner.run(changed, client=client)
    assert {r["retuned_from"] for r in res.tasks} == {index}  # no file read again
    base = manifest(inputs, out)
    text = dry_run(capsys, base, out)
    assert text.count(f"config of {stage} changed (rerun from {stage} on stored rows)") == len(inputs)
    res = runner.run(base, client=client)
    assert {r["retuned_from"] for r in res.tasks} == {index}
    assert_equals_fresh(out, fresh)


def _with_stage_option(inputs, out, stage, change):
    """The base manifest with one stage option changed (stage list rewritten, same order)."""
    m = manifest(inputs, out)
    (key, value), = change.items()
    opt = key.rsplit(".", 1)[-1]
    stages = [dict(s) for s in m.stages]
    for s in stages:
        if stage in s:
            s[stage] = dict(s[stage] or {}, **{opt: value})
    return manifest(inputs, out, stages=stages)


def _stages_without(inputs, out, name):
    m = manifest(inputs, out)
    return [s for s in m.stages if name not in s]


def test_add_a_stage(client, inputs, fresh, tmp_path, capsys):
    out = start_from(fresh, tmp_path)
    runner.run(manifest(inputs, out, stages=_stages_without(inputs, out, "gopher_quality")), client=client)
    base = manifest(inputs, out)
    text = dry_run(capsys, base, out)
    assert "stage gopher_quality added" in text and "rerun from gopher_quality on stored rows" in text
    assert "upstream phase 1 changed" in text
    runner.run(base, client=client)
    assert_equals_fresh(out, fresh)


def test_remove_a_stage(client, inputs, fresh, tmp_path, capsys):
    out = start_from(fresh, tmp_path)
    stages = [dict(s) for s in manifest(inputs, out).stages]
    stages.insert(5, {"ldnoobw": {}})
    runner.run(manifest(inputs, out, stages=stages), client=client)
    base = manifest(inputs, out)
    assert "stage ldnoobw removed" in dry_run(capsys, base, out)
    res = runner.run(base, client=client)
    assert {r["retuned_from"] for r in res.tasks} == {5}
    assert_equals_fresh(out, fresh)


def test_extraction_change_reads_again(client, inputs, fresh, tmp_path, capsys):
    out = start_from(fresh, tmp_path)
    runner.run(_with_stage_option(inputs, out, "extract", {"x.timeout_s": 9}), client=client)
    base = manifest(inputs, out)
    assert "file read again" in dry_run(capsys, base, out)
    res = runner.run(base, client=client)
    assert {r["retuned_from"] for r in res.tasks} == {None}
    assert_equals_fresh(out, fresh)


# ------------------------------------------------------------------ inputs added, removed, retried, respelled

def test_add_an_input(client, inputs, fresh, tmp_path, capsys):
    out = start_from(fresh, tmp_path)
    runner.run(manifest(inputs[:2], out), client=client)
    base = manifest(inputs, out)
    text = dry_run(capsys, base, out)
    assert "input added" in text and "run   dedup: upstream phase 1 changed" in text
    res = runner.run(base, client=client)
    assert [n for n, r in by_task(res).items() if not r.get("skipped")] == [inputs[2].name]
    assert_equals_fresh(out, fresh)


def test_remove_an_input(client, inputs, fresh, tmp_path, capsys):
    out = start_from(fresh, tmp_path)
    extra = tmp_path / "extra.warc.gz"
    shutil.copy(_shared_warc("dolma_wget_sample-0001.warc.gz"), extra)
    runner.run(manifest(inputs + [extra], out), client=client)
    base = manifest(inputs, out)
    text = dry_run(capsys, base, out)
    assert "removed (inputs no longer in the manifest" in text and "extra" in text
    runner.run(base, client=client)
    assert_equals_fresh(out, fresh)
    assert not list(out.rglob("extra-*"))


def _shared_warc(name):
    from datapipe.env import shared_data

    return shared_data() / "warc" / name


from distributed.diagnostics.plugin import WorkerPlugin  # noqa: E402


class _FailReads(WorkerPlugin):
    """Worker plugin: reading one file raises (as a full disk or a vanished mount would); its
    teardown (``unregister_worker_plugin``) gives the worker its own reader back."""

    name = "fail-reads"

    def __init__(self, target: str):
        self.target = target

    def setup(self, worker):
        import datapipe.engine.task as task

        if not hasattr(task, "_real_read_input"):
            task._real_read_input = task.read_input
        real, target = task._real_read_input, self.target

        def read_input(path, *a, **k):
            if path.endswith(target):
                raise OSError(28, "No space left on device")
            return real(path, *a, **k)
        task.read_input = read_input

    def teardown(self, worker):
        import datapipe.engine.task as task

        task.read_input = task._real_read_input


def _reads_as_before() -> bool:
    import datapipe.engine.task as task

    return task.read_input is getattr(task, "_real_read_input", task.read_input)


def test_failed_file_is_retried(client, inputs, fresh, tmp_path, capsys):
    out = start_from(fresh, tmp_path)
    (out / "_tasks" / f"{by_name(out, WARC[1])}.json").unlink()  # make the file's task run again
    client.register_plugin(_FailReads(WARC[1]))
    try:
        res = runner.run(manifest(inputs, out, **{"cluster.retries": 0}), client=client)
        assert [f["input"].rsplit("/", 1)[-1] for f in res.failed] == [WARC[1]]
    finally:
        client.unregister_worker_plugin(_FailReads.name)
    assert all(client.run(_reads_as_before).values())  # the shared cluster's workers read every file again
    base = manifest(inputs, out)
    assert "retry: no success record" in dry_run(capsys, base, out)
    res = runner.run(base, client=client)
    assert not res.failed
    res = runner.run(base, client=client)  # and a later rerun is a no-op
    assert all(r.get("skipped") for r in res.tasks)
    assert_equals_fresh(out, fresh)


def by_name(out: Path, name: str) -> str:
    for f in (out / "_tasks").glob("*.json"):
        if json.loads(f.read_text())["input"].endswith(name):
            return f.stem
    raise AssertionError(name)


def test_same_input_spelled_three_ways(client, inputs, fresh, tmp_path, monkeypatch, capsys):
    out = start_from(fresh, tmp_path)
    link = tmp_path / "link.warc.gz"
    os.symlink(inputs[0], link)
    monkeypatch.chdir(inputs[0].parent)  # relative spellings are the manifest folder's, not the cwd's
    rel = os.path.relpath(inputs[0], Path(out).parent)
    spellings = [rel, str(inputs[0]), str(link), f"./{rel}"] + [str(p) for p in inputs[1:]]
    m = manifest(spellings, out)
    text = dry_run(capsys, m, out)
    assert "inputs naming a file already listed (read once):" in text and text.count("skip  ") == 3 + 2  # 3 tasks, dedup, tokenize
    resolved = runner.check_before_work(m)
    assert list(resolved) == [str(Path(p).resolve()) for p in inputs] and len(resolved.duplicates) == 3
    res = runner.run(m, inputs=resolved, client=client)
    assert len(res.tasks) == 3 and all(r.get("skipped") for r in res.tasks)
    assert_equals_fresh(out, fresh)


def test_output_inside_an_input_directory_is_never_read_back(client, inputs, fresh, tmp_path, capsys):
    """The output lives inside the directory given as input: the second run skips it, reads
    nothing of its own, and equals the fresh run."""
    d = tmp_path / "in"
    d.mkdir()
    for p in inputs:
        shutil.copy(p, d / p.name)
    shutil.copytree(fresh, d / "out")  # as if a first run had written there
    m = manifest([d], d / "out")
    text = dry_run(capsys, m, d / "out")
    assert "inside the output directory" in text and text.count("read  ") == 3  # new paths: read once
    res = runner.run(m, client=client)
    assert len(res.tasks) == 3 and res.ledger.records_in == json.loads((fresh / "ledger.json").read_text())["totals"]["in"]
    assert sorted(Path(r["input"]).name for r in res.tasks) == sorted(WARC)
    assert not [r for r in res.tasks if "/out/" in r["input"]]
    res = runner.run(m, client=client)
    assert all(r.get("skipped") for r in res.tasks)
    # same records, same decisions (file names differ: the inputs live elsewhere)
    assert ledger_counts(d / "out") == ledger_counts(fresh)
    assert len(list((d / "out" / "documents").glob("*.parquet"))) == len(list((fresh / "documents").glob("*.parquet")))


# ------------------------------------------------------------------ global phases

def test_dedup_config_change_redoes_only_dedup_and_after(client, inputs, fresh, tmp_path, capsys):
    out = start_from(fresh, tmp_path)
    res = runner.run(manifest(inputs, out, **{"dedup.minhash.threshold": 0.9}), client=client)
    assert all(r.get("skipped") for r in res.tasks)
    assert not res.phases["dedup"].get("skipped") and not res.phases["tokenize"].get("skipped")
    base = manifest(inputs, out)
    text = dry_run(capsys, base, out)
    assert "config of dedup changed" in text and "skip  " in text.split("phases:")[0]
    res = runner.run(base, client=client)
    assert all(r.get("skipped") for r in res.tasks)  # phase 1 not redone
    assert_equals_fresh(out, fresh)


def test_tokenizer_change_redoes_only_tokenize(client, inputs, fresh, tmp_path, capsys):
    out = start_from(fresh, tmp_path)
    res = runner.run(manifest(inputs, out, **{"tokenize.tokenizer": "gpt2_bpe"}), client=client)
    assert all(r.get("skipped") for r in res.tasks) and res.phases["dedup"].get("skipped")
    base = manifest(inputs, out)
    text = dry_run(capsys, base, out)
    assert "skip  dedup: up to date" in text and "run   tokenize: config of tokenize changed" in text
    res = runner.run(base, client=client)
    assert all(r.get("skipped") for r in res.tasks) and res.phases["dedup"].get("skipped")
    assert not res.phases["tokenize"].get("skipped")
    assert_equals_fresh(out, fresh)


def test_unchanged_rerun_skips_everything(client, inputs, fresh, tmp_path, capsys):
    out = start_from(fresh, tmp_path)
    base = manifest(inputs, out)
    text = dry_run(capsys, base, out)
    actions = [ln.split()[0] for ln in text.splitlines() if ln.startswith("  ")]
    assert actions and set(actions) == {"skip"}, text
    res = runner.run(base, client=client)
    assert all(r.get("skipped") for r in res.tasks) and all(p.get("skipped") for p in res.phases.values())
    assert_equals_fresh(out, fresh)


def test_from_and_only_force_reruns(client, inputs, fresh, tmp_path, capsys):
    out = start_from(fresh, tmp_path)
    base = manifest(inputs, out)
    assert "run   dedup: forced" in dry_run(capsys, base, out, "--from", "dedup")
    res = runner.run(base, client=client, force_from="dedup")
    assert not res.phases["dedup"].get("skipped") and not res.phases["tokenize"].get("skipped")
    res = runner.run(base, client=client, only=["tokenize"])
    assert res.phases["dedup"].get("skipped") and not res.phases["tokenize"].get("skipped")
    assert_equals_fresh(out, fresh)
    assert cli_main(["run", str(base.source_file), "--dry-run", "--only", "nope"]) == 2


def _all_files(out: Path) -> dict[str, str]:
    """sha256 of every file of a run but those that vary by design (timings: ledger, markers, report)."""
    # timings vary by design: the ledger, the report, markers and the phases' own completion records
    varying = ("ledger.json", "report.html", ".datapipe.lock", "_dedup.json", "_tokenize.json")
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name not in varying and p.parent.name not in ("_phases", "_tasks")}


def test_phase_switched_off_or_moved_leaves_nothing_behind(client, inputs, fresh, tmp_path, capsys):
    """The Dolma export switched off and the token shards moved (``tokenize.output``): the rerun holds
    the files of a fresh run of the final manifest, no ``dolma/``, no old ``tokens/``, and no marker
    of a phase it no longer runs (these stayed behind before)."""
    out = start_from(fresh, tmp_path)
    runner.run(manifest(inputs, out, output_formats=["parquet", "dolma_jsonl"]), client=client)
    assert list((out / "dolma").glob("*.jsonl.zst")) and (out / "_phases" / "dolma_jsonl.json").exists()
    final = manifest(inputs, out, **{"tokenize.output": "tokens2"})
    text = dry_run(capsys, final, out)
    assert "phases no longer run" in text and "/dolma/" in text and "/tokens/index.json" in text, text
    runner.run(final, client=client)
    assert not (out / "_phases" / "dolma_jsonl.json").exists()
    ref = tmp_path / "fresh-final" / "run"
    ref.parent.mkdir()
    runner.run(manifest(inputs, ref, **{"tokenize.output": "tokens2"}), client=client)
    got, want = _all_files(out), _all_files(ref)
    assert sorted(got) == sorted(want)
    assert [k for k in got if got[k] != want[k]] == []
    assert sorted(p.name for p in (out / "_phases").iterdir()) == sorted(p.name for p in (ref / "_phases").iterdir())
