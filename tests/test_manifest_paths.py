"""Relative paths in a manifest resolve against the manifest's folder, whatever the working
directory; ``init`` presets write token shards and name one output folder throughout."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from datapipe.cli import main as cli
from datapipe.cli.init import PRESETS
from datapipe.manifest.load import load_manifest

REPO = Path(__file__).resolve().parent.parent
SMALL = "resiliparse_CC-MAIN-2020-34_excerpt.warc.gz"


@pytest.fixture
def job(tmp_path, data_dir, monkeypatch):
    """``tmp/job/m.yaml`` reading ``data/x.warc.gz`` and ``models/q.ftz`` beside it; cwd elsewhere."""
    d = tmp_path / "job"
    (d / "data").mkdir(parents=True)
    (d / "models").mkdir()
    shutil.copy(data_dir / "warc" / SMALL, d / "data" / SMALL)
    shutil.copy(REPO / "classifiers" / "models" / "quality_wiki_cc.ftz", d / "models" / "q.ftz")
    shutil.copy(REPO / "classifiers" / "models" / "quality_wiki_cc.json", d / "models" / "q.json")
    m = d / "m.yaml"
    m.write_text(yaml.safe_dump({
        "name": "t", "inputs": {"paths": [f"data/{SMALL}", "data/*.warc.gz"]}, "output": "out",
        "cluster": {"workers": 1, "dashboard_address": "127.0.0.1:0"},
        "stages": [{"extract": {}}, {"langid": {}}, {"quality_classifier": {"model_path": "models/q.ftz"}},
                   {"toxicity": {}}]}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("COLUMNS", "10000")
    monkeypatch.setenv("DATAPIPE_CACHE", str(tmp_path / "cache"))
    return d


def test_relative_read_paths_resolve_against_the_manifest_folder(job):
    m = load_manifest(job / "m.yaml")
    assert m.inputs.paths == [str(job / "data" / SMALL), str(job / "data" / "*.warc.gz")]
    cfg = {next(iter(s)): next(iter(s.values())) for s in m.stages}
    assert cfg["quality_classifier"]["model_path"] == str(job / "models" / "q.ftz")
    assert cfg["toxicity"] == {}  # defaults (a shipped model's name) are looked up as before
    assert m.output == "out"  # where the run writes stays the user's: the working directory


def test_a_manifest_runs_from_another_working_directory(job, capsys, lid_model):
    assert cli.main(["run", str(job / "m.yaml"), "--dry-run"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"[{job / 'data' / SMALL}]" in out and "1 input file(s)" in out


def test_command_line_paths_stay_relative_to_the_working_directory(job, capsys, lid_model):
    shutil.copy(job / "data" / SMALL, Path.cwd() / "here.warc.gz")
    m = load_manifest(job / "m.yaml", {"inputs.paths": ["here.warc.gz"]})
    assert m.inputs.paths == ["here.warc.gz"]
    assert cli.main(["run", str(job / "m.yaml"), "--input", "here.warc.gz", "--dry-run"]) == 0
    assert f"[{Path.cwd() / 'here.warc.gz'}]" in capsys.readouterr().out


def test_a_relative_model_path_missing_beside_the_manifest_names_the_places_looked(job, capsys, lid_model):
    text = (job / "m.yaml").read_text().replace("models/q.ftz", "models/gone.ftz")
    (job / "m.yaml").write_text(text)
    assert cli.main(["run", str(job / "m.yaml"), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "fastText model models/gone.ftz not found" in err


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_init_presets_tokenize_and_name_one_output_folder(preset, tmp_path, monkeypatch, capsys, lid_model):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "10000")
    assert cli.main(["init", "jobs/mine", "--preset", preset]) == 0
    printed = capsys.readouterr().out
    text = (tmp_path / "jobs" / "mine" / "manifest.yaml").read_text()
    m = load_manifest(tmp_path / "jobs" / "mine" / "manifest.yaml")
    assert m.section("tokenize") is not None and m.section("tokenize").tokenizer == "r50k_base"
    header = [ln for ln in text.splitlines() if ln.startswith("#")][:8]
    named = set(re.findall(r"runs/[\w-]+", "\n".join(header))) | set(re.findall(r"runs/[\w-]+", printed))
    assert named == {m.output} == {f"runs/{preset}"}, (named, m.output)
    assert "--output" not in "\n".join(header) + printed  # the try-it line writes where the header says
    # the embedded sample, found from the manifest's folder and from another working directory
    monkeypatch.chdir(tmp_path / "jobs")
    assert cli.main(["run", str(tmp_path / "jobs" / "mine" / "manifest.yaml"), "--dry-run"]) == 0
    plan = capsys.readouterr().out
    assert "input file(s)" in plan and " 0 input file(s)" not in plan
    assert re.search(r"^\s*run\s+tokenize\b", plan, re.MULTILINE), plan

def test_an_init_preset_run_writes_token_shards(tmp_path, monkeypatch, capsys, data_dir, lid_model):
    """fineweb, as written, on 60 records of one sample file: token shards and their index."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DATAPIPE_CACHE", str(tmp_path / "cache"))
    assert cli.main(["init", "job", "--preset", "fineweb", "--input", str(data_dir / "warc" / "dolma_wget_sample-0000.warc.gz"),
                     "--output", str(tmp_path / "run")]) == 0
    text = (tmp_path / "job" / "manifest.yaml").read_text().replace("workers: null", "workers: 1")
    (tmp_path / "job" / "manifest.yaml").write_text(text)
    assert cli.main(["run", "job/manifest.yaml", "--limit", "60", "--no-progress"]) == 0, capsys.readouterr().err
    index = json.loads((tmp_path / "run" / "tokens" / "index.json").read_text())
    shards = sorted((tmp_path / "run" / "tokens").glob("shard-*.parquet"))
    assert shards and index["total_tokens"] > 0 and index["total_documents"] > 0
    assert len(index["shards"]) == len(shards)
