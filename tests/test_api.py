"""The Python API against the CLI on the same input, and the CLI's output at 80 columns.

One ``datapipe run`` (the CLI, in this process, ``--limit 40``) of a small WARC and a JSONL file
with planted exact and near duplicates is the reference: ``Pipeline.run`` must give the same
ledger and shards, ``stages.get(...).apply`` the same signals and decisions on the rows each stage
saw, ``datapipe.dedup`` the same clusters; the printed funnels must hold every ledger number.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import os
import re
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from rich.cells import cell_len

import datapipe
from datapipe.cli import main as cli
from datapipe.manifest.load import load_manifest

LIMIT = 40
CHAIN = [{"extract": {"main_content": True}}, {"langid": {"min_score": 0.65}}, {"gopher_repetition": {}},
         {"gopher_quality": {}}, {"c4": {}}, {"fineweb": {}}]
CHAIN_NAMES = [next(iter(s)) for s in CHAIN]


def _manifest_text(out: Path) -> str:
    stages = "\n".join(f"  - {json.dumps(s)}" for s in CHAIN)
    return (f"name: api-test\ninputs: {{paths: []}}\noutput: {json.dumps(str(out))}\n"
            f"stages:\n{stages}\ndedup: {{}}\nreport: {{enabled: false}}\n")


def _duplicates_jsonl(data_dir: Path, path: Path) -> Path:
    """Seven real documents, exact copies of two, near copies (one word changed) of two."""
    with gzip.open(data_dir / "cc_text" / "dolma_cc_en_head-0091.jsonl.gz", "rt") as fh:
        docs = [json.loads(line) for line in fh][3:10]
    out = list(docs)
    for k, d in enumerate((docs[3], docs[5])):
        out.append(dict(d, id=f"exact-{k}", created="2021-01-01T00:00:00Z"))
    for k, d in enumerate((docs[4], docs[6])):
        words = d["text"].split(" ")
        words[len(words) // 2] = "zebra"
        out.append(dict(d, id=f"near-{k}", text=" ".join(words), created="2021-01-01T00:00:00Z"))
    path.write_text("".join(json.dumps(d) + "\n" for d in out), encoding="utf-8")
    return Path(os.path.realpath(path))


@pytest.fixture(scope="module")
def inputs(data_dir, tmp_path_factory):
    warc = Path(os.path.realpath(data_dir / "warc" / "dolma_wget_sample-0000.warc.gz"))
    return [warc, _duplicates_jsonl(data_dir, tmp_path_factory.mktemp("jsonl") / "dups.jsonl")]


@pytest.fixture(scope="module")
def cli_run(inputs, tmp_path_factory):
    """``datapipe run`` as a user types it, stdout captured as a pipe at 80 columns."""
    base = tmp_path_factory.mktemp("cli-run")
    out, manifest = base / "run", base / "m.yaml"
    manifest.write_text(_manifest_text(out))
    buf = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(buf):
        mp.setenv("COLUMNS", "80")
        rc = cli.main(["run", str(manifest), *[a for p in inputs for a in ("--input", str(p))], "--limit", str(LIMIT),
                       "--workers", "1", "--no-progress", "--dashboard", "127.0.0.1:0"])
    return {"rc": rc, "out": out, "manifest": manifest, "stdout": buf.getvalue(),
            "ledger": json.loads((out / "ledger.json").read_text())}


def _table(run_dir: Path, folder: str) -> pa.Table:
    files = sorted((run_dir / folder).glob("*.parquet"))
    return pa.concat_tables([pq.read_table(f) for f in files], promote_options="default") if files else None


def _counts(ledger: dict) -> dict:
    """The ledger without timings (they differ between two runs)."""
    return {k: {f: v for f, v in s.items() if f != "seconds"} for k, s in ledger["stages"].items()}


# ----------------------------------------------------------------- the funnel at 80 columns

def _check_funnel_text(text: str, ledger: dict, extra_cols: int) -> None:
    """Every stage's line holds in/kept/rejected/errored; every reason's line its count."""
    lines = text.splitlines()
    assert all(cell_len(line) <= 80 for line in lines), [line for line in lines if cell_len(line) > 80]
    i = 0
    for name, s in ledger["stages"].items():
        while not lines[i].startswith(name + " ") and lines[i] != name:
            i += 1
        nums = re.findall(r"[\d,.]+%?", lines[i][len(name):])
        want = [f"{s['in']:,}", f"{s['kept']:,}", f"{sum(s['rejected'].values()):,}", f"{sum(s['errored'].values()):,}"]
        assert nums[:4] == want, (lines[i], want)
        assert len(nums) == 4 + extra_cols, lines[i]
        reasons = {**s["rejected"], **s["errored"]}
        for j in range(len(reasons)):
            row = lines[i + 1 + j]
            label, count = row.split()[0], row.split()[1]
            full = next(r for r in reasons if r == label or r.split(":", 1)[1] == label or r.endswith(label.rstrip("…")))
            assert count == f"{reasons.pop(full):,}", row
        assert not reasons
        i += 1


def test_run_prints_every_ledger_number_at_80_columns(cli_run):
    assert cli_run["rc"] == 0
    led, text = cli_run["ledger"], cli_run["stdout"]
    _check_funnel_text(text, led, extra_cols=1)  # + seconds
    for name, s in led["stages"].items():  # seconds as printed, to 0.1
        line = next(x for x in text.splitlines() if x.startswith(name + " "))
        assert line.split()[-1] == f"{s['seconds']:,.1f}"
    t = led["totals"]
    m = re.search(rf"records in {t['in']:,}: kept {t['kept']:,}, rejected {t['rejected']:,}, "
                  rf"errored {t['errored']:,} in ([\d.]+) s", " ".join(text.split()))
    assert m and abs(float(m.group(1)) - led["seconds"]) <= 0.051  # printed to 0.1 s
    assert f"limited: at most {LIMIT} records per input file (1 of 2 input(s) cut short)" in " ".join(text.split())


def test_inspect_prints_every_ledger_number_at_80_columns(cli_run, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert cli.main(["inspect", str(cli_run["out"])]) == 0
    text = capsys.readouterr().out
    _check_funnel_text(text, cli_run["ledger"], extra_cols=0)  # share and bytes only on reason lines
    flat = " ".join(text.split())
    assert all(f"{k} {v:,}" in flat for k, v in cli_run["ledger"]["records_by_type"].items())
    t = cli_run["ledger"]["totals"]
    assert (f"kept {t['kept']:,} of {t['in']:,} records; rejected {t['rejected']:,}, errored {t['errored']:,}"
            in flat)
    assert "limited run: at most 40 records per input file" in text
    assert "gopher_quality: min_words=50, max_words=100000" in text  # the thresholds in force
    assert "minhash.threshold=0.8" in text


# ----------------------------------------------------------------- what the run recorded

def test_ledger_records_limit_and_effective_configs(cli_run, inputs):
    led = cli_run["ledger"]
    assert led["limit"] == {"records_per_file": LIMIT, "inputs_cut": 1}  # the WARC has 48 records, the JSONL 11
    assert led["stages"]["read"]["in"] == LIMIT + 11
    m = load_manifest(cli_run["manifest"], {"inputs.paths": [str(p) for p in inputs]})
    assert led["stage_configs"] == m.effective_stage_configs()
    gq = dict(next(iter(c.items())) for c in led["stage_configs"])["gopher_quality"]
    assert gq["min_words"] == 50 and gq["min_stop_words"] == 2  # defaults, not {}
    assert led["phase_configs"]["dedup"]["dedup"]["minhash"]["threshold"] == 0.8
    from datapipe.engine.plan import make_plan

    def plan(**ov):
        return make_plan(load_manifest(cli_run["manifest"], {"inputs.paths": [str(p) for p in inputs], **ov}),
                         [str(p) for p in inputs])
    assert {t.action for t in plan(**{"inputs.limit": LIMIT}).tasks} == {"skip"}
    # The limit is a read setting: another one (or none) reads the files again.
    assert {t.why for t in plan(**{"inputs.limit": LIMIT + 1}).tasks} == {"input or read settings changed"}
    assert {t.action for t in plan().tasks} == {"read"}


# ------------------------------------------------------------------------------ Pipeline

def _objects_pipeline():
    from datapipe.stages import get

    return datapipe.Pipeline(stages=[get("extract", main_content=True), ("langid", {"min_score": 0.65}),
                                     "gopher_repetition", get("gopher_quality"), {"c4": {}}, get("fineweb")],
                             dedup=True, report=False, name="api-test")


def test_pipeline_from_file_dict_and_objects_is_one_manifest(cli_run):
    from_file = datapipe.Pipeline(cli_run["manifest"])
    from_dict = datapipe.Pipeline({"stages": CHAIN, "dedup": {}, "report": {"enabled": False}})
    objs = _objects_pipeline()
    for p in (from_dict, objs):
        assert p.manifest.effective_stages() == from_file.manifest.effective_stages()
        assert p.manifest.section("dedup") == from_file.manifest.section("dedup")
        assert p.manifest.section("report") == from_file.manifest.section("report")
    path = cli_run["manifest"].with_name("from-objects.yaml")
    path.write_text(objs.to_yaml())
    assert load_manifest(path, {"inputs.paths": ["x"], "output": "y"}).effective_stages() == \
        from_file.manifest.effective_stages()


def test_pipeline_run_equals_cli(cli_run, inputs, tmp_path):
    res = _objects_pipeline().run(inputs, tmp_path / "api", limit=LIMIT, workers=1, dashboard_address="127.0.0.1:0")
    led = json.loads((tmp_path / "api" / "ledger.json").read_text())
    assert _counts(led) == _counts(cli_run["ledger"])
    assert led["stage_configs"] == cli_run["ledger"]["stage_configs"] and led["limit"] == cli_run["ledger"]["limit"]
    assert res.paths["documents"] == str(tmp_path / "api" / "documents") and res.paths["tokens"] is None
    assert res.ledger.totals() == cli_run["ledger"]["totals"]
    cols = ["id", "text", "lang", "gopher_word_count", "fineweb_line_punct_ratio"]
    want = _table(cli_run["out"], "documents").select(cols).sort_by("id")
    assert res.documents(cols).to_pylist() == want.to_pylist()
    rej = _table(cli_run["out"], "rejected").select(["id", "reject_reason", "duplicate_of"]).sort_by("id")
    assert res.rejected(["id", "reject_reason", "duplicate_of"]).to_pylist() == rej.to_pylist()


# ------------------------------------------------------------------------- stage.apply

def _rows_reaching(run_dir: Path, stage: str) -> pa.Table:
    """Rows of the run that entered ``stage``, with the text it saw, and what it decided."""
    later = CHAIN_NAMES[CHAIN_NAMES.index(stage):]
    kept = _table(run_dir, "_filtered")
    rej = _table(run_dir, "rejected")
    rej = rej.filter(pc.is_in(rej.column("reject_stage"), value_set=pa.array(later)))
    rows = pa.concat_tables([kept, rej.select(kept.schema.names)])
    # the text the stage saw: undo the edits of the text editors at or after it (their snapshots)
    snaps = [rows.column(f"text_before_{n}") for n in later if f"text_before_{n}" in rows.column_names]
    if snaps:
        rows = rows.set_column(rows.schema.get_field_index("text"), "text", pc.coalesce(*snaps, rows.column("text")))
    return rows.sort_by("id")


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


@pytest.mark.parametrize("stage", ["langid", "gopher_repetition", "gopher_quality", "c4", "fineweb"])
def test_stage_apply_equals_run(cli_run, stage):
    rows = _rows_reaching(cli_run["out"], stage)
    assert rows.num_rows >= 15
    st = datapipe.stages.get(stage, **dict(next(iter(c.items())) for c in CHAIN)[stage])
    lang = None if stage == "langid" else rows.column("lang").to_pylist()
    got = st.apply(rows.column("text").to_pylist(), lang=lang, url=rows.column("url").to_pylist(),
                   id=rows.column("id").to_pylist())
    assert got.column("id").to_pylist() == rows.column("id").to_pylist()
    decided_here = [r if s == stage else None for r, s in zip(rows.column("reject_reason").to_pylist(),
                                                              rows.column("reject_stage").to_pylist())]
    assert got.column("reject_reason").to_pylist() == decided_here
    cols = [f.name for f in st.fields] + (["lang", "lang_score"] if stage == "langid" else [])
    for col in cols:
        assert all(_same(a, b) for a, b in zip(got.column(col).to_pylist(), rows.column(col).to_pylist())), col
    if stage == "c4":  # the text it edited is the text stored for the rows it passed on
        after = _rows_reaching(cli_run["out"], "fineweb")
        stored = dict(zip(after.column("id").to_pylist(), after.column("text").to_pylist()))
        edited = {i: t for i, t, ok in zip(*(got.column(c).to_pylist() for c in ("id", "text", "kept"))) if ok}
        assert edited == stored and len(edited) >= 10


def test_stage_apply_computes_lang_itself(cli_run):
    rows = _rows_reaching(cli_run["out"], "gopher_quality")
    st = datapipe.stages.get("gopher_quality")
    got = st.apply(rows.column("text").to_pylist())  # no lang: langid runs first, as in the run
    assert got.column("lang").to_pylist() == rows.column("lang").to_pylist()
    assert got.column("gopher_stop_word_count").to_pylist() == rows.column("gopher_stop_word_count").to_pylist()


def test_extract_apply_equals_run(cli_run, inputs):
    from datapipe.io.readers import read_input

    docs = [it.row for k, it in enumerate(read_input(str(inputs[0]))) if k < LIMIT and it.status == "document"]
    got = datapipe.stages.get("extract").apply(pa.Table.from_pylist(docs))  # reader rows: raw pages
    rows = _rows_reaching(cli_run["out"], "extract")
    rows = rows.filter(pc.equal(rows.column("source"), str(inputs[0])))
    assert sorted(got.column("id").to_pylist()) == rows.column("id").to_pylist() and rows.num_rows >= 10
    got = got.sort_by("id")
    assert got.column("text").to_pylist() == rows.column("text").to_pylist()
    assert got.column("reject_reason").to_pylist() == [
        r if s == "extract" else None for r, s in zip(*(rows.column(c).to_pylist() for c in ("reject_reason", "reject_stage")))]


# ---------------------------------------------------------------------------- dedup

def _run_clusters(run_dir: Path) -> dict[str, list[str]]:
    rej = _table(run_dir, "rejected")
    rej = rej.filter(pc.equal(rej.column("reject_stage"), "dedup"))
    groups = defaultdict(list)
    for i, d in zip(rej.column("id").to_pylist(), rej.column("duplicate_of").to_pylist()):
        groups[d].append(i)
    return [[rep, *sorted(m)] for rep, m in sorted(groups.items())]


def test_dedup_equals_run(cli_run):
    src = _table(cli_run["out"], "_filtered").select(["id", "text", "warc_date"])
    res = datapipe.dedup(src)
    assert res.clusters == _run_clusters(cli_run["out"])
    assert set(res.kept) == set(_table(cli_run["out"], "documents").column("id").to_pylist())
    reasons = set(res.reasons.values())
    assert {"dedup:exact", "dedup:near"} <= reasons  # both planted kinds found
    led = cli_run["ledger"]["stages"]
    for step, c in res.counts.items():
        assert {k: v for k, v in c.items() if k != "seconds"} == {k: v for k, v in led[step].items() if k != "seconds"}


def test_dedup_inputs_and_settings(inputs, tmp_path):
    from datapipe.io.readers import read_input

    items = [it.row for it in read_input(str(inputs[1]))]
    by_path = datapipe.dedup(paths=[inputs[1]])
    assert by_path.ids == [r["id"] for r in items]
    by_text = datapipe.dedup([r["text"] for r in items], ids=[r["id"] for r in items],
                             dates=[r["warc_date"] for r in items])
    assert by_text.clusters == by_path.clusters and len(by_path.clusters) == 4
    files = []
    for k, r in enumerate(items):
        files.append(tmp_path / f"doc{k}.txt")
        files[-1].write_text(r["text"], encoding="utf-8")
    as_files = datapipe.dedup(files)
    name = {str(f): r["id"] for f, r in zip(files, items)}
    assert sorted(sorted(name[i] for i in c) for c in as_files.clusters) == \
        sorted(sorted(c) for c in by_text.clusters)  # no dates: ties go to the smallest id (path)
    exact_only = datapipe.dedup([r["text"] for r in items], near=False)
    assert set(exact_only.reasons.values()) == {"dedup:exact"} and len(exact_only.clusters) == 2
    strict = datapipe.dedup([r["text"] for r in items], threshold=0.9999)
    assert len(strict.clusters) == 2  # the near copies differ by one word
    assert by_text.documents.column("id").to_pylist() == by_text.kept
    with pytest.raises(ValueError, match="threshold"):
        datapipe.dedup(["a b c"], threshold=2)
    with pytest.raises(ValueError, match="unique"):
        datapipe.dedup(["a", "b"], ids=["x", "x"])
    with pytest.raises(ValueError, match="WARC input"):
        datapipe.dedup(paths=[inputs[0]])


# ------------------------------------------------------------------------------ report

def test_report_lists_settings_and_counts_per_signal(cli_run, tmp_path):
    from datapipe.cli.termfmt import flat_items, short_value
    from datapipe.inspect import reader as I
    from datapipe.inspect.rules import signal_reasons
    from datapipe.stages.phases.report import html as report

    run = I.Run.open(str(cli_run["out"]))
    page = report._settings_html(run)  # the section render() puts under the plots (drawing them all: ~30 s)
    rows = dict(((s, k), v) for s, k, v in re.findall(
        r'<tr data-stage="([^"]+)" data-setting="([^"]+)">(?:<th[^>]*>[^<]*</th>)?<td>[^<]*</td><td>([^<]*)</td>', page))
    for item in cli_run["ledger"]["stage_configs"]:
        (name, cfg), = item.items()
        for key, v in flat_items(cfg):
            assert rows[(name, key)] == short_value(v), (name, key)
    assert rows[("dedup", "minhash.threshold")] == "0.8" and ("dedup", "minhash.bands x rows (chosen)") in rows
    own = signal_reasons([next(iter(c)) for c in cli_run["ledger"]["stage_configs"]])
    assert own["c4_sentence_count"] == ["c4:min_sentences"] and own["lang_score"] == ["langid:low_score"]
    groups = report._values(run, "c4_sentence_count", own["c4_sentence_count"])
    assert len(groups["rejected: c4:min_sentences"]) == cli_run["ledger"]["stages"]["c4"]["rejected"]["c4:min_sentences"]
    rej = _table(cli_run["out"], "rejected")
    assert len(groups["rejected by other rules"]) == pc.sum(pc.and_(
        pc.is_valid(rej.column("c4_sentence_count")), pc.not_equal(rej.column("reject_reason"), "c4:min_sentences"))).as_py()
    vals = {"kept": groups["kept"], "rejected": groups["rejected: c4:min_sentences"]}
    assert report._hist(vals, "t", log_y="always") != report._hist(vals, "t", log_y="never")
    with pytest.raises(ValueError, match="log_y"):
        report.write_report(str(cli_run["out"]), out=str(tmp_path / "x.html"), log_y="sometimes")
