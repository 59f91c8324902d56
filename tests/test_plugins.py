"""A stage and a global phase from a user's own package, through the entry points.

``tests/plugin_pkg/drop_phrase.py`` (a documents transform) and ``tests/plugin_pkg/shout.py`` (a
per-document stage) are each one file outside ``datapipe/``; this module writes the package
metadata ``pip install`` would write (a ``.dist-info`` with ``entry_points.txt``), puts it on the
path, and runs real manifests on a cluster started after that (workers inherit the path). Every
rerun (no change, a changed setting, the step removed) must equal a fresh run of the final
manifest into an empty folder, byte for byte, with ``--dry-run`` saying why.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from datapipe.cli.main import main as cli_main
from datapipe.engine import runner
from datapipe.manifest.load import Cluster, load_manifest

PKG = Path(__file__).resolve().parent / "plugin_pkg"
WARC = "resiliparse_CC-MAIN-2020-34_excerpt.warc.gz"
COMPARED = ("documents", "rejected", "errors", "_filtered", "tokens")
ENTRY_POINTS = """[datapipe.phases]
drop_phrase = drop_phrase:DropPhrasePhase

[datapipe.stages]
shout = shout
"""


@pytest.fixture(scope="module")
def plugin_client(tmp_path_factory):
    site = tmp_path_factory.mktemp("site")
    info = site / "datapipe_example_plugins-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: datapipe-example-plugins\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(PKG))
    mp.syspath_prepend(str(site))
    mp.setenv("PYTHONPATH", os.pathsep.join([str(site), str(PKG)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    from distributed import Client

    try:
        with runner.local_cluster(2, memory_limit=Cluster().worker_memory_limit(2),
                                  dashboard_address="127.0.0.1:0") as cluster, Client(cluster) as client:
            yield client
    finally:
        mp.undo()
        # forget the plugins, so that later tests see the built-in registry only
        from datapipe import phase, stage

        phase._PHASES.pop("drop_phrase", None)
        stage._REGISTRY.pop("shout", None)


def write_manifest(tmp: Path, out: Path, data_dir: Path, phrases=None, shout: dict | None = None) -> Path:
    m = {"name": "plugins", "inputs": {"paths": [str(data_dir / "warc" / WARC)]}, "output": str(out),
         "cluster": {"workers": 2, "dashboard_address": "127.0.0.1:0"},
         "stages": [{"extract": {}}, {"langid": {}}] + ([{"shout": shout}] if shout is not None else []),
         "dedup": {"exact": True, "minhash": {"enabled": True, "threshold": 0.8}},
         "tokenize": {"tokenizer": "r50k_base", "eos": "<|endoftext|>"},
         "report": {"enabled": False}}
    if phrases is not None:
        m["drop_phrase"] = {"phrases": phrases}
    text = yaml.safe_dump(m, sort_keys=False)
    path = tmp / f"manifest-{hashlib.sha1(text.encode()).hexdigest()[:10]}.yaml"
    path.write_text(text)
    return path


def tree(out: Path) -> dict[str, str]:
    return {f"{k}/{f.name}": hashlib.sha256(f.read_bytes()).hexdigest()
            for k in COMPARED for f in sorted((out / k).glob("*")) if f.is_file()}


def totals(out: Path) -> dict:
    led = json.loads((out / "ledger.json").read_text())
    return {"totals": led["totals"], "stages": {k: (v["in"], v["kept"], v["rejected"]) for k, v in led["stages"].items()}}


def run(client, manifest: Path):
    return runner.run(load_manifest(manifest), client=client)


def fresh(client, tmp: Path, manifest_of) -> Path:
    out = tmp / f"fresh-{len(list(tmp.glob('fresh-*')))}"
    run(client, manifest_of(out))
    return out


def dry(capsys, manifest: Path) -> str:
    capsys.readouterr()
    assert cli_main(["run", str(manifest), "--dry-run"]) == 0
    return capsys.readouterr().out


def equal(a: Path, b: Path) -> None:
    ta, tb = tree(a), tree(b)
    assert sorted(ta) == sorted(tb)
    assert [k for k in ta if ta[k] != tb[k]] == []
    assert totals(a) == totals(b)


def texts(out: Path) -> dict[str, str]:
    return {i: t for f in sorted((out / "documents").glob("*.parquet"))
            for i, t in zip(*pq.read_table(f, columns=["id", "text"]).to_pydict().values())}


def test_a_phase_from_a_plugin_package(plugin_client, data_dir, tmp_path, capsys):
    base = write_manifest(tmp_path, tmp_path / "base", data_dir)
    run(plugin_client, base)
    docs = texts(tmp_path / "base")
    # two phrases that each match some documents but not all, chosen from the data
    words = [w for w in ("cookie", "privacy", "search", "login", "news", "copyright", "home", "contact")
             if 0 < sum(w in t.lower() for t in docs.values()) < len(docs)][:2]
    assert len(words) == 2, "the sample lost its variety"
    out = tmp_path / "out"
    man = {k: (lambda o, p=p: write_manifest(tmp_path, o, data_dir, p)) for k, p in
           (("a", [words[0]]), ("b", [words[1]]), ("none", None))}

    run(plugin_client, man["a"](out))                                       # fresh, with the phase
    want = {i for i, t in docs.items() if words[0] in t.lower()}           # computed from the documents
    rej = pq.read_table(sorted((out / "rejected").glob("drop_phrase-*.parquet"))).to_pydict()
    assert set(rej["id"]) == want and set(rej["reject_reason"]) == {"drop_phrase:match"}
    assert set(texts(out)) == set(docs) - want
    led = json.loads((out / "ledger.json").read_text())
    assert led["stages"]["drop_phrase"]["rejected"] == {"drop_phrase:match": len(want)}
    assert led["totals"]["kept"] == len(docs) - len(want)

    text = dry(capsys, man["a"](out))                                      # no change
    assert "skip  drop_phrase: up to date" in text and "skip  dedup: up to date" in text
    assert "removed" not in text
    before = tree(out)
    run(plugin_client, man["a"](out))
    assert tree(out) == before

    capsys.readouterr()                                                    # inspect explains them
    assert cli_main(["inspect", str(out), "--reason", "drop_phrase:match", "--limit", "50"]) == 0
    shown = capsys.readouterr().out
    assert all(i[:8] in shown for i in want)

    text = dry(capsys, man["b"](out))                                      # its config changed
    assert "run   drop_phrase: config of drop_phrase changed" in text and "skip  dedup: up to date" in text
    run(plugin_client, man["b"](out))
    equal(out, fresh(plugin_client, tmp_path, man["b"]))

    text = dry(capsys, man["none"](out))                                   # removed
    assert "run   dedup: writes the documents to documents/ now" in text
    assert "rejected/drop_phrase-" in text                                 # its files go, listed
    run(plugin_client, man["none"](out))
    equal(out, fresh(plugin_client, tmp_path, man["none"]))
    assert not list(out.glob("_documents/*")) and not list(out.glob("_phases/drop_phrase.json"))


def test_a_stage_from_a_plugin_package(plugin_client, data_dir, tmp_path, capsys):
    from datapipe.stage import registry

    assert registry()["shout"].__module__ == "shout"
    out = tmp_path / "out"
    man = {k: (lambda o, s=s: write_manifest(tmp_path, o, data_dir, shout=s)) for k, s in
           (("a", {"max_caps": 0.05}), ("b", {"max_caps": 0.9}), ("none", None))}
    res = run(plugin_client, man["a"](out))
    assert res.ledger.stages["shout"].n_rejected > 0                       # the rule bites on real pages
    rej = [r for f in (out / "rejected").glob("*.parquet") for r in pq.read_table(f).to_pylist()
           if r["reject_stage"] == "shout"]
    from shout import caps_fraction  # recomputed from stored text

    assert rej and all(r["reject_reason"] == "shout:caps" and caps_fraction(r["text"]) > 0.05 for r in rej)
    before = tree(out)
    assert "skip " in dry(capsys, man["a"](out))
    run(plugin_client, man["a"](out))
    assert tree(out) == before

    text = dry(capsys, man["b"](out))
    assert "config of shout changed (rerun from shout on stored rows)" in text
    run(plugin_client, man["b"](out))
    equal(out, fresh(plugin_client, tmp_path, man["b"]))

    text = dry(capsys, man["none"](out))
    assert "stage shout removed" in text
    run(plugin_client, man["none"](out))
    equal(out, fresh(plugin_client, tmp_path, man["none"]))
    shutil.rmtree(out)
