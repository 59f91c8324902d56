"""Mistakes in a manifest or a command line are one line naming what to fix, exit 2, before anything
is created; one bad record (an id that is an object) costs that record only."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from datapipe.io.readers import read_input
from datapipe.manifest.load import ManifestError, load_manifest

CLI = [sys.executable, "-m", "datapipe.cli.main"]
REPO = Path(__file__).resolve().parent.parent


def write(tmp_path, text, name="m.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def cli(args, cwd):
    return subprocess.run(CLI + args, capture_output=True, text=True, cwd=cwd, timeout=300,
                          env={**os.environ, "COLUMNS": "400"})


def test_a_stage_listed_twice_is_a_manifest_error(tmp_path):
    p = write(tmp_path, """\
        inputs: {paths: [a.jsonl]}
        output: out
        stages:
          - langid: {}
          - c4: {}
          - langid: {min_score: 0.9}
        """)
    with pytest.raises(ManifestError) as e:
        load_manifest(p)
    assert str(e.value).startswith(f"{p}:6: stages[2].langid: stage 'langid' is listed twice (stages[0] and stages[2])")


def test_mix_weights_naming_an_unknown_domain_lists_the_known_ones(tmp_path):
    p = write(tmp_path, """\
        inputs: {paths: [a.jsonl]}
        output: out
        stages: [{langid: {}}]
        mix:
          rules: [{domain: german, lang: de}]
          default_domain: web
          weights: {german: 1, wiki: 2}
        """)
    with pytest.raises(ManifestError) as e:
        load_manifest(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:4: mix") and "'wiki'" in msg and "known domains: german, web" in msg
    p.write_text(p.read_text().replace("wiki: 2", "web: 2"))
    assert load_manifest(p).section("mix").weights == {"german": 1, "web": 2}


def test_warc_inputs_without_extract_are_refused_before_the_output_is_made(tmp_path, data_dir):
    warc = data_dir / "warc" / "dolma_wget_sample-0000.warc.gz"
    p = write(tmp_path, f"""\
        inputs: {{paths: ["{warc}"]}}
        output: {tmp_path / 'out'}
        stages: []
        dedup: null
        cluster: {{workers: 1, dashboard_address: "127.0.0.1:0"}}
        """)
    r = cli(["run", str(p)], tmp_path)
    assert r.returncode == 2, r.stderr[-3000:]
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "no stage extracts their text" in err[0] and str(warc.resolve()) in err[0], err  # inputs are named by their real path
    assert not (tmp_path / "out").exists()
    # WET records are text already: no extract needed
    wet = data_dir / "warc" / "whirlwind_CC-MAIN-2024-22.warc.wet.gz"
    from datapipe.engine import runner

    m = load_manifest(p, {"inputs.paths": [str(wet)]})
    runner.check_extraction(m, [str(wet)])


def test_from_an_unknown_phase_creates_nothing(tmp_path):
    (tmp_path / "a.jsonl").write_text(json.dumps({"text": "hello there"}) + "\n")
    p = write(tmp_path, f"""\
        inputs: {{paths: ["{tmp_path / 'a.jsonl'}"]}}
        output: {tmp_path / 'out'}
        stages: []
        cluster: {{workers: 1, dashboard_address: "127.0.0.1:0"}}
        """)
    r = cli(["run", str(p), "--from", "nonsense"], tmp_path)
    assert r.returncode == 2, r.stderr[-3000:]
    assert "unknown or disabled phase 'nonsense'" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_an_object_id_errors_that_record_only(tmp_path):
    lines = [{"id": {"shard": 3, "n": 1}, "text": "object id"}, {"id": "doc-2", "text": "string id"},
             {"id": 7, "text": "integer id"}, {"id": [1, 2], "text": "list id"}, {"id": True, "text": "bool id"},
             {"text": "no id"}]
    f = tmp_path / "a.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    items = list(read_input(str(f)))
    assert [it.status for it in items] == ["errored", "document", "document", "errored", "errored", "document"]
    bad = items[0]
    assert bad.reason == "read:bad_id" and "is a dict, not a string or integer" in bad.detail
    assert [it.row["warc_record_id"] for it in items if it.status == "document"] == ["doc-2", "7", None]
