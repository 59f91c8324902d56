"""`datapipe inspect` on a real small run: every number checked against the ledger and pyarrow."""
import json
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from scale_helpers import SMALL_RUN_STAGES as STAGES

from datapipe.cli import main as cli
from datapipe.inspect import reader as I
from datapipe.inspect.what_if import what_if


@pytest.fixture(scope="module")
def run_dir(small_stages_run):
    """conftest's run (extract, langid, gopher_quality; dedup on, mix/tokenize off), shared with test_report.py."""
    return small_stages_run[1]


def _table(run_dir, kind):
    return pq.read_table(run_dir / kind)


def test_funnel_equals_ledger_and_shards(run_dir):
    led = json.loads((run_dir / "ledger.json").read_text())
    f = I.funnel(I.Run.open(str(run_dir)))
    assert [s["stage"] for s in f["stages"]] == list(led["stages"])
    assert {"read", "extract", "langid", "gopher_quality"} <= set(led["stages"])
    rej, err, docs = _table(run_dir, "rejected"), _table(run_dir, "errors"), _table(run_dir, "documents")
    by_reason = Counter(rej.column("reject_reason").to_pylist())  # dedup rows stamp stage "dedup"
    bytes_by = Counter()
    for r, b in zip(rej.column("reject_reason").to_pylist(), rej.column("payload_bytes").to_pylist()):
        bytes_by[r] += b or 0
    # error_reason is "<ledger reason>: <detail>"; the ledger counts the reason
    errs = Counter(zip(err.column("error_stage").to_pylist(),
                       [r.split(": ", 1)[0] for r in err.column("error_reason").to_pylist()]))
    for s in f["stages"]:
        ls = led["stages"][s["stage"]]
        assert (s["in"], s["kept"]) == (ls["in"], ls["kept"])
        assert {r["reason"]: r["count"] for r in s["rejected"]} == ls["rejected"]
        assert {r["reason"]: r["count"] for r in s["errored"]} == ls["errored"]
        for r in s["rejected"]:
            assert r["share"] == pytest.approx(r["count"] / ls["in"])
            if not r["reason"].startswith("non_document:"):  # stored rows: pyarrow agrees
                assert r["count"] == by_reason[r["reason"]]
                assert r["bytes"] == bytes_by[r["reason"]]
        for r in s["errored"]:
            assert r["count"] == errs[(s["stage"], r["reason"])]
    assert sum(by_reason.values()) > 0 and sum(errs.values()) == 1  # the clipped file
    assert f["kept"] == list(led["stages"].values())[-1]["kept"] == docs.num_rows
    assert f["records_by_type"] == led["records_by_type"]
    langs = Counter(docs.column("lang").to_pylist())
    assert {d["lang"]: d["docs"] for d in f["languages"]} == dict(langs.most_common(20))


def test_cli_json_funnel_and_not_a_run(run_dir, tmp_path, capsys):
    assert cli.main(["inspect", str(run_dir), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["totals"] == json.loads((run_dir / "ledger.json").read_text())["totals"]
    assert cli.main(["inspect", str(tmp_path)]) == 2
    assert "is not a datapipe run" in capsys.readouterr().err
    assert cli.main(["inspect", str(run_dir)]) == 0  # the rich tables render
    assert "gopher_quality" in capsys.readouterr().out


def test_reason_sampling_is_seeded(run_dir):
    run = I.Run.open(str(run_dir))
    rej = _table(run_dir, "rejected")
    reason, total = Counter(rej.column("reject_reason").to_pylist()).most_common(1)[0]
    assert total >= 4
    a = I.sample_reason(run, reason, n=3, seed=7)
    b = I.sample_reason(run, reason, n=3, seed=7)
    c = I.sample_reason(run, reason, n=3, seed=8)
    ids = [s["id"] for s in a["samples"]]
    assert ids == [s["id"] for s in b["samples"]] and len(set(ids)) == 3 and a["total"] == total
    assert ids != [s["id"] for s in c["samples"]] or total == 3
    truth = dict(zip(rej.column("id").to_pylist(), rej.column("reject_reason").to_pylist()))
    assert all(truth[i] == reason for i in ids)
    s = a["samples"][0]
    row = next(r for r in rej.to_pylist() if r["id"] == s["id"])
    assert s["text_head"] == (row["text"] or "").splitlines()[:5]
    for col, v in s["explain"]["signals"].items():  # the deciding signals are the stored values
        assert v == row[col]
    assert len(I.sample_reason(run, reason, n=total + 10)["samples"]) == total
    with pytest.raises(I.InspectError, match="no documents with reason"):
        I.sample_reason(run, "nope:nothing")


def test_where_equals_pyarrow_filter(run_dir):
    run = I.Run.open(str(run_dir))
    docs = _table(run_dir, "documents")
    mask = pc.and_(pc.less(docs["lang_score"], 0.95), pc.equal(docs["lang"], "en"))
    want = sorted(docs.filter(mask).column("id").to_pylist())
    got = I.where(run, "kept", "lang_score < 0.95 and lang = 'en'", limit=10_000)
    assert got["count"] == len(want) and [r["id"] for r in got["rows"]] == want
    assert "text" not in got["columns"] and "lang_score" in got["columns"]
    rej = _table(run_dir, "rejected")
    m2 = pc.fill_null(pc.less(rej["gopher_word_count"], 50), False)
    got2 = I.where(run, "rejected", "gopher_word_count < 50", limit=10_000)
    assert got2["count"] == pc.sum(m2).as_py() > 0
    assert "gopher_word_count" in got2["columns"]
    with pytest.raises(I.InspectError, match="single quotes"):
        I.where(run, "kept", 'lang = "en"')


def test_what_if_langid_min_score_moves_the_independent_count(run_dir):
    run = I.Run.open(str(run_dir))
    docs, rej = _table(run_dir, "documents"), _table(run_dir, "rejected")
    kept_low = pc.sum(pc.less(docs["lang_score"], 0.9)).as_py()
    later = rej.filter(pc.invert(pc.is_in(rej["reject_stage"], pa.array(["extract", "langid"]))))
    later_low = pc.sum(pc.less(later["lang_score"], 0.9)).as_py()
    old = pc.sum(pc.equal(rej["reject_reason"], "langid:low_score")).as_py()
    w = what_if(run, ["langid.min_score=0.9"])
    assert kept_low > 0
    assert w["moved"]["kept_to_rejected"] == kept_low
    assert w["moved"]["later_rejection_to_this_stage"] == later_low
    assert w["rejected_new"].get("langid:low_score", 0) == old + kept_low + later_low
    assert w["reproduced"] == w["rows_reached_stage"] == docs.num_rows + old + later.num_rows
    assert w["kept_new_min"] == docs.num_rows - kept_low


def test_what_if_is_generic_over_stage_deciders(run_dir):
    run = I.Run.open(str(run_dir))
    docs, rej = _table(run_dir, "documents"), _table(run_dir, "rejected")
    w = what_if(run, ["gopher_quality.min_words=200"])  # gopher.decide_quality, found by its Config
    assert w["moved"]["kept_to_rejected"] == pc.sum(pc.less(docs["gopher_word_count"], 200)).as_py() > 0
    assert w["reproduced"] == w["rows_reached_stage"]
    wc = pc.equal(rej["reject_reason"], "gopher_quality:word_count")
    assert w["rejected_old"].get("gopher_quality:word_count", 0) == pc.sum(wc).as_py()
    with pytest.raises(I.InspectError, match="cannot be recomputed"):
        what_if(run, ["extract.min_chars=5"])
    with pytest.raises(I.InspectError, match="STAGE.PARAM=VALUE"):
        what_if(run, ["min_score"])


def test_what_if_shows_the_settings_in_force_for_an_older_ledger(run_dir, tmp_path, capsys):
    """A ledger that recorded the manifest's own values (``gopher_quality: {}``, as runs did before
    defaults were filled in) made --what-if say ``min_words None -> 200`` and return ``{}``."""
    import shutil

    old = tmp_path / "old-run"
    shutil.copytree(run_dir, old)
    led = json.loads((old / "ledger.json").read_text())
    led["stage_configs"] = STAGES
    (old / "ledger.json").write_text(json.dumps(led))
    w = what_if(I.Run.open(str(old)), ["gopher_quality.min_words=200"])
    from datapipe.stage import registry

    defaults = registry()["gopher_quality"].Config().model_dump(mode="json")
    assert w["config_old"] == defaults and w["config_new"] == dict(defaults, min_words=200)
    assert w["reproduced"] == w["rows_reached_stage"]  # decided with the thresholds the run applied
    assert cli.main(["inspect", str(old), "--what-if", "gopher_quality.min_words=200"]) == 0
    assert "gopher_quality: min_words 50 -> 200" in capsys.readouterr().out
    assert cli.main(["inspect", str(old), "--what-if", "langid.languages=[en]"]) == 0
    assert "langid: languages null -> [en]" in capsys.readouterr().out  # YAML's spelling, not None


def test_ledger_and_inspect_record_phase_settings_in_force(run_dir, tmp_path, capsys):
    """``report`` ran without a section and ledger.json said ``report: null``; dedup's banding
    chosen for ``bands: null`` was only in the phase stats."""
    import shutil

    from datapipe.inspect.run_config import effective_phase_configs
    from datapipe.stages.phases.dedup.config import DedupConfig
    from datapipe.stages.phases.report import ReportConfig

    led = json.loads((run_dir / "ledger.json").read_text())
    assert led["phase_configs"]["report"] == {"report": ReportConfig().model_dump(mode="json")}
    assert led["phase_configs"]["report"]["report"] == {"enabled": True, "log_y": "auto", "histograms": False}
    dedup = led["phase_configs"]["dedup"]["dedup"]
    want = DedupConfig(**dedup).minhash.band_rows()  # the config's own rule
    assert (led["phases"]["dedup"]["stats"]["bands"], led["phases"]["dedup"]["stats"]["rows"]) == want
    old = tmp_path / "old-run"  # a ledger written before: report null
    shutil.copytree(run_dir, old)
    led["phase_configs"]["report"] = {"report": None}
    (old / "ledger.json").write_text(json.dumps(led))
    eff = effective_phase_configs(I.Run.open(str(old)))
    assert eff["report"]["report"] == {"enabled": True, "log_y": "auto", "histograms": False}
    assert (eff["dedup"]["dedup"]["minhash"]["bands"], eff["dedup"]["dedup"]["minhash"]["rows"]) == want
    assert dedup["minhash"]["bands"] is None  # the recorded config is left as the manifest said
    assert cli.main(["inspect", str(old)]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    assert f"minhash.bands={want[0]}, minhash.rows={want[1]}" in flat and "report: enabled=true, log_y=auto, histograms=false" in flat


def test_doc_fate_and_raw_record(run_dir, capsys):
    run = I.Run.open(str(run_dir))
    row = _table(run_dir, "rejected").to_pylist()[0]
    d = I.document(run, row["id"])
    assert d["fate"] == dict(d["fate"], fate="rejected", stage=row["reject_stage"], reason=row["reject_reason"])
    assert d["provenance"]["warc_record_id"] == row["warc_record_id"] and d["text"] == row["text"]
    assert d["raw_location"] == {"file": row["source"], "offset": row["warc_offset"]}
    kept = _table(run_dir, "documents").to_pylist()[0]
    raw = I.raw_html(kept["source"], kept["warc_offset"])
    assert raw["warc_record_id"] == kept["warc_record_id"] and raw["url"] == kept["url"]
    assert "<" in raw["html"]
    assert cli.main(["inspect", str(run_dir), "--doc", kept["id"], "--raw", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fate"] == {"fate": "kept"} and out["raw"]["warc_record_id"] == kept["warc_record_id"]
    with pytest.raises(I.InspectError, match="no document with id"):
        I.document(run, "0" * 32)


def test_doc_near_dup_cluster(run_dir):
    run = I.Run.open(str(run_dir))
    rej = _table(run_dir, "rejected")
    dups = rej.filter(pc.is_valid(rej["duplicate_of"]))
    assert dups.num_rows > 0  # the dedup phase of the manifest found copies in the sample
    row = dups.to_pylist()[0]
    rep = row["duplicate_of"]
    want = sorted(dups.filter(pc.equal(dups["duplicate_of"], rep)).column("id").to_pylist())
    c = I.document(run, row["id"])["cluster"]
    assert c == {"representative": rep, "members": [rep] + want, "size": len(want) + 1}
    assert I.document(run, rep)["cluster"] == c  # the kept representative sees the same cluster
    assert I.document(run, rep)["fate"] == {"fate": "kept"}


def test_gopher_repetition_thresholds_for_every_signal_column():
    # Rae et al. 2021, Table A1 (the stage's defaults): one threshold per signal column, so the
    # report draws a line on every repetition histogram.
    from datapipe.inspect.rules import column_thresholds
    from datapipe.stages.gopher import GopherRepetition

    th = column_thresholds("gopher_repetition", {})
    assert set(th) == {f.name for f in GopherRepetition.fields}
    assert th["gopher_dup_para_char_frac"] == [0.2] and th["gopher_top_3gram_char_frac"] == [0.18]
    assert th["gopher_dup_10gram_char_frac"] == [0.1]
    # A manifest's values win; an n-gram map given in the manifest replaces the default map.
    th = column_thresholds("gopher_repetition", {"dup_line_frac": 0.25, "dup_ngram_char_frac": {5: 0.2}})
    assert th["gopher_dup_line_frac"] == [0.25] and th["gopher_dup_5gram_char_frac"] == [0.2]
    assert "gopher_dup_6gram_char_frac" not in th


def test_doc_lists_every_row_of_a_repeated_id(run_dir, tmp_path, capsys):
    """An id repeats where two inputs hold the same WARC-Record-ID (a copied file): ``--doc``
    lists every row with its fate, not only the first (found by an attack run: 12 rows, one shown)."""
    import shutil

    import pyarrow as pa

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    kept = _table(copy, "documents").to_pylist()[0]
    schema = pq.read_schema(next((copy / "rejected").glob("*.parquet")))
    dup = {c: kept.get(c) for c in schema.names} | {
        "reject_stage": "dedup", "reject_reason": "dedup:exact", "duplicate_of": kept["id"],
        "source": "/elsewhere/copy.warc.gz", "warc_offset": 7}
    pq.write_table(pa.Table.from_pylist([dup], schema=schema), copy / "rejected" / "copy-0123abcd.parquet")
    d = I.document(I.Run.open(str(copy)), kept["id"])
    assert d["fate"] == {"fate": "kept"}
    assert d["occurrences"] == [
        {"fate": "kept", "stage": None, "reason": None, "source": kept["source"], "offset": kept["warc_offset"]},
        {"fate": "rejected", "stage": "dedup", "reason": "dedup:exact", "source": "/elsewhere/copy.warc.gz", "offset": 7}]
    assert cli.main(["inspect", str(copy), "--doc", kept["id"]]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "This id occurs 2 times" in out and "dedup:exact" in out and "/elsewhere/copy.warc.gz" in out
    # An id found once has one occurrence and no table.
    assert len(I.document(I.Run.open(str(run_dir)), kept["id"])["occurrences"]) == 1


def test_raw_of_a_moved_input_or_a_text_input_is_a_line_not_a_traceback(run_dir, tmp_path, capsys):
    """``--doc ID --raw`` on a run whose WARC was moved since was a FileNotFoundError traceback; on a
    JSONL document it parsed the JSONL as WARC and printed an empty 'original HTML (None)'."""
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    shard = next((copy / "documents").glob("*.parquet"))
    t = pq.read_table(shard)
    gone = str(tmp_path / "moved.warc.gz")
    t = t.set_column(t.schema.get_field_index("source"), "source", pa.array([gone] * t.num_rows))
    pq.write_table(t, shard)
    doc = t.column("id")[0].as_py()
    assert cli.main(["inspect", str(copy), "--doc", doc, "--raw"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"original HTML: cannot read the input: {gone}: No such file or directory" in out
    from datapipe.cli.inspect import _raw

    text_doc = {"raw_location": {"file": "/d/x.jsonl", "offset": 0}, "provenance": {"record_type": "text"}}
    assert _raw(text_doc) == (None, "none: /d/x.jsonl is a text input (the text above is the document as read)")
