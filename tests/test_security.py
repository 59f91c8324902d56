"""Security (issue 8): manifests are data, generated names stay inside the output directory, the
dashboard binds to loopback by default."""
from __future__ import annotations

import ast
import json
import random
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from datapipe.engine import runner
from datapipe.engine.task_plan import task_id_for
from datapipe.manifest.load import Cluster, ManifestError, load_manifest

REPO = Path(__file__).resolve().parent.parent


def _write(tmp: Path, text: str) -> Path:
    p = tmp / "m.yaml"
    p.write_text(text)
    return p


# ------------------------------------------------------------------ manifests are data

@pytest.mark.parametrize("name", ["os.system", "datapipe.engine.task.run_file_task", "builtins.eval", "__import__"])
def test_code_named_as_a_stage_is_refused(tmp_path, name):
    p = _write(tmp_path, f"inputs: {{paths: [a.warc.gz]}}\noutput: out\nstages:\n  - {json.dumps(name)}: {{}}\n")
    with pytest.raises(ManifestError) as e:
        load_manifest(p)
    msg = str(e.value)
    assert f":4: stages[0].{name}: unknown stage {name!r}; known stages: " in msg
    assert "extract" in msg and "langid" in msg


def test_code_named_as_a_section_is_refused(tmp_path):
    p = _write(tmp_path, "inputs: {paths: [a.warc.gz]}\noutput: out\nos.system: {command: 'touch x'}\n")
    with pytest.raises(ManifestError) as e:
        load_manifest(p)
    msg = str(e.value)
    assert ":3: os.system: unknown setting 'os.system'" in msg
    # the sections of registered phases only (a plugin another test installed may add its own)
    assert re.search(r"phase sections: dedup, (\w+, )*mix, tokenize", msg), msg


def test_python_yaml_tags_are_not_executed(tmp_path):
    marker = tmp_path / "PWNED"
    p = _write(tmp_path, f"inputs: {{paths: [a.warc.gz]}}\noutput: !!python/object/apply:os.system "
                         f"['touch {marker}']\n")
    with pytest.raises(ManifestError, match="not valid YAML"):
        load_manifest(p)
    assert not marker.exists()


_BUILTINS = {"eval", "exec", "compile", "__import__", "import_module"}
_QUALIFIED = {("importlib", "import_module"), ("builtins", "eval"), ("builtins", "exec"),
              ("yaml", "load"), ("yaml", "unsafe_load"), ("yaml", "full_load"), ("yaml", "load_all"),
              ("yaml", "unsafe_load_all"), ("pickle", "load"), ("pickle", "loads"), ("torch", "load")}
#: The only dynamic imports, each over a fixed list in the source: CLI subcommands, phase modules
#: (stages.phases.PHASE_MODULES), stage modules (datapipe.stage.STAGE_MODULES); and the extraction sandbox's
#: pickles, exchanged with its own child process over a pipe (never read from inputs or manifests).
_ALLOWED = {("datapipe/cli/main.py", "import_module"), ("stages/phases/__init__.py", "import_module"),
            ("datapipe/stage.py", "import_module"), ("stages/lib/extract_sandbox.py", "loads")}


def test_no_eval_or_dynamic_import_beyond_the_allow_lists():
    found = set()
    for f in sorted(list((REPO / "datapipe").rglob("*.py")) + list((REPO / "stages").rglob("*.py"))):
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
            on = fn.value.id if isinstance(fn, ast.Attribute) and isinstance(fn.value, ast.Name) else None
            if isinstance(fn, ast.Name) and name in _BUILTINS or (on, name) in _QUALIFIED:
                found.add((str(f.relative_to(REPO)), name))
    assert found == _ALLOWED


def test_sections_come_only_from_the_fixed_phase_list():
    """A manifest section is looked up only among the phases of the fixed PHASE_MODULES list."""
    from datapipe.phase import phases, section_classes
    from datapipe.stages.phases import PHASE_MODULES
    from datapipe.stages.phases.dedup.config import DedupConfig
    from datapipe.stages.phases.report import ReportConfig
    from datapipe.stages.phases.tokenize.mixture import MixConfig
    from datapipe.stages.phases.tokenize.tokenizer import TokenizeConfig

    # built-in phases come from the fixed list; others only from an installed package's entry
    # point (datapipe.plugins), never from a manifest
    builtin = {p.__module__ for p in phases() if p.__module__.startswith("datapipe.")}
    assert builtin <= set(PHASE_MODULES)
    mine = {k: v for k, v in section_classes().items() if v.__module__.startswith("datapipe.")}
    assert mine == {"dedup": DedupConfig, "mix": MixConfig, "tokenize": TokenizeConfig, "report": ReportConfig}


# ------------------------------------------------------------------ names stay inside the output

HOSTILE = ["../../etc/x.warc.gz", "..warc.gz", ".warc.gz", "..", ".", "/", "a/../../..",
           "https://host/crawl/../../x.warc.gz?next=../../y/z.warc.gz", "s3://b/k/..%2F..%2Fx.warc.gz",
           "C:\\x\\..\\..\\y.warc.gz", "..\\..\\y.warc.gz", "_hidden.warc.gz", "-rf.warc.gz", "...jsonl",
           "x/" + "../" * 50 + "etc/passwd", "a" * 300 + ".warc.gz"]


@pytest.mark.parametrize("name", HOSTILE)
def test_task_ids_are_one_visible_path_segment(tmp_path, name):
    tid = task_id_for(name)
    assert "/" not in tid and "\\" not in tid and tid not in (".", "..")
    assert re.fullmatch(r"[^._\-].*-[0-9a-f]{8}", tid), tid
    assert len(tid) <= 89
    for kind in ("documents", "rejected", "errors", "_tasks"):
        p = (tmp_path / kind / f"{tid}.parquet").resolve()
        assert p.parent == (tmp_path / kind).resolve()


@pytest.mark.parametrize("value", ["..", "../tokens", "/tmp/tokens", "", ".", "a/../..", "tok\\..\\..",
                                   "documents", "_tasks", "s3://other/bucket"])
def test_tokenize_output_cannot_leave_or_clobber_the_run(tmp_path, value):
    p = _write(tmp_path, "inputs: {paths: [a.jsonl]}\noutput: out\ntokenize:\n  output: " + json.dumps(value) + "\n")
    with pytest.raises(ManifestError, match=r":4: tokenize.output: Value error"):
        load_manifest(p)


def test_tokenize_output_nested_folder_is_fine(tmp_path):
    p = _write(tmp_path, "inputs: {paths: [a.jsonl]}\noutput: out\ntokenize: {output: tokens/v2}\n")
    assert load_manifest(p).section("tokenize").output == "tokens/v2"


#: Real file names a crawler or a user could hand us (legal on Linux), and one path with ``..``.
HOSTILE_FILES = ["..jsonl", ".jsonl", "..%2F..%2Fevil.jsonl", "..\\..\\evil.jsonl", "_hidden.jsonl",
                 "-dash.jsonl"]


def test_hostile_input_names_write_only_under_the_output(tmp_path, warm_client):
    root = tmp_path / "w"
    inp = root / "in"
    (inp / "sub").mkdir(parents=True)
    inputs, texts = [], {}
    for i, name in enumerate(HOSTILE_FILES + ["plain.jsonl"]):
        rng = random.Random(i)  # distinct random words: no document is a (near) duplicate of another
        lines = [" ".join(f"w{rng.randrange(10**6)}" for _ in range(40)) for _ in range(3)]
        (inp / name).write_text("".join(json.dumps({"id": f"{i}-{j}", "text": t}) + "\n" for j, t in enumerate(lines)))
        inputs.append(str(inp / name))
        texts.update({f"{i}-{j}": t for j, t in enumerate(lines)})
    inputs[-1] = str(inp / "sub" / ".." / "plain.jsonl")  # a path with '..' in it
    out = root / "out"
    m = {"inputs": {"paths": inputs, "split_bytes": 0}, "output": str(out), "output_formats": ["parquet", "dolma_jsonl"],
         "cluster": {"workers": 1, "dashboard_address": "127.0.0.1:0"}, "stages": [],
         "dedup": {}, "tokenize": {}}
    manifest = load_manifest(_write(tmp_path, json.dumps(m)))
    before = {p for p in tmp_path.rglob("*")}
    result = runner.run(manifest, inputs=inputs, client=warm_client)
    new = {p for p in tmp_path.rglob("*")} - before
    outside = [p for p in new if not p.resolve().is_relative_to(out.resolve())]
    assert outside == []
    assert not list(out.rglob(".*")) and not [p for p in (out / "documents").iterdir() if p.name[0] in "._-"]
    # Every document is in documents/ (text inputs, no filter: all kept, none deduplicated).
    got = {r["warc_record_id"]: r["text"] for f in (out / "documents").glob("*.parquet")
           for r in pq.read_table(f, columns=["warc_record_id", "text"]).to_pylist()}
    assert got == texts
    assert result.ledger.kept == len(texts) and (out / "tokens" / "index.json").exists()
    assert len(list((out / "dolma").glob("*.jsonl.zst"))) == len(inputs)


# ------------------------------------------------------------------ dashboard

def test_dashboard_binds_to_loopback_by_default(tmp_path):
    assert Cluster().dashboard_address.startswith("127.0.0.1:")
    main = load_manifest(REPO / "manifests" / "cc-2026.yaml")
    assert main.cluster.dashboard_address.startswith("127.0.0.1:")
    m = load_manifest(REPO / "manifests" / "cc-2026.yaml",
                      {"inputs.crawl": None, "inputs.paths": [str(tmp_path)], "output": str(tmp_path),
                       "cluster.workers": 1, "cluster.dashboard_address": "127.0.0.1:0"})
    with runner.dask_client(m) as client:
        hosts = client.run_on_scheduler(
            lambda dask_scheduler: [s.getsockname()[0] for s in dask_scheduler.http_server._sockets.values()])
        sched = client.scheduler.address
    assert hosts and set(hosts) == {"127.0.0.1"}
    assert sched.startswith("tls://127.0.0.1:")  # TLS: tests/test_cluster_tls.py
