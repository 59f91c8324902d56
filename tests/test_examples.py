"""Every script in examples/ runs, on small inputs, and does what its docstring says."""
from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from doc_run import EXAMPLES, ROOT, example, shared_data, small_run


def test_filter_texts_rejects_the_repetitive_text_only():
    rows = example("filter_texts").main()
    assert [r["kept"] for r in rows] == [True, False, True]
    assert rows[1]["reject_reason"] == "gopher_repetition:top_2gram_char_frac"
    # "buy now" repeated: the top 2-gram covers every character of the words
    assert rows[1]["gopher_top_2gram_char_frac"] == pytest.approx(1.0)


def test_dedup_list_finds_the_exact_and_the_near_copy():
    res = example("dedup_list").main()
    assert res.kept == ["00000000", "00000003"]
    assert res.reasons == {"00000001": "dedup:exact", "00000002": "dedup:near"}
    assert res.clusters == [["00000000", "00000001", "00000002"]]


def test_pipeline_example_balances_and_writes_its_job(warm_client):
    out = small_run(warm_client)
    ledger = json.loads((out / "ledger.json").read_text())
    kept = sum(pq.read_metadata(p).num_rows for p in (out / "documents").glob("*.parquet"))
    assert kept == ledger["stages"]["dedup_near"]["kept"] > 0
    from datapipe.manifest.load import load_manifest

    m = load_manifest(out / "job.yaml", {"output": str(out), "inputs.paths": [str(out / "ledger.json")]})
    assert [next(iter(s)) for s in m.stages][:4] == ["extract", "langid", "gopher_repetition", "gopher_quality"]


def test_train_loop_resumes_with_the_same_batches(warm_client):
    index = small_run(warm_client) / "tokens" / "index.json"
    full, rest = example("train_loop").main([str(index), "--steps", "4", "--seq-len", "32"])
    assert len(full) == 4 and rest == full[2:]


def test_hf_datasets_reads_what_the_run_wrote(warm_client):
    pytest.importorskip("datasets", reason="the hf extra (pip install -e '.[hf]') is not installed")
    out = small_run(warm_client)
    kept, tokens = example("hf_datasets").main([str(out)])
    assert kept.num_rows == sum(pq.read_metadata(p).num_rows for p in (out / "documents").glob("*.parquet"))
    assert sum(int(n) for n in tokens["num_tokens"]) == json.loads((out / "tokens" / "index.json").read_text())["total_tokens"]


def _import_plugin():
    import sys

    sys.path.insert(0, str(EXAMPLES / "my_datapipe_plugin"))
    import my_datapipe_plugin  # noqa: F401


def test_custom_stage_and_phase_run_in_a_pipeline(warm_client, tmp_path):
    # The warm cluster's workers did not start from the example script, so they import the plugin
    # here, as `dask worker --preload my_datapipe_plugin` would (test_custom_stage_phase_as_a_user
    # runs the script as a user does, with its own cluster).
    warm_client.run(_import_plugin)
    _import_plugin()
    r, hist = example("custom_stage_phase").main(["--output", str(tmp_path / "plugin"), "--limit", "30"],
                                                 client=warm_client)
    from my_datapipe_plugin.phase import histogram
    from my_datapipe_plugin.stage import upper_frac

    docs = r.documents(["text", "shouting_upper_frac"]).to_pylist()
    assert hist["documents"] == len(docs) == sum(hist["counts"]) > 0
    assert hist["counts"] == histogram([len(d["text"]) for d in docs], [0, 1000, 5000])
    for d in docs:  # the stored signal is the stage's function of the kept text
        want = upper_frac(d["text"])[0]
        assert (d["shouting_upper_frac"] is None) == (want is None)
        assert want is None or d["shouting_upper_frac"] == pytest.approx(want, rel=1e-6)
    counts = r.ledger.stage("shouting")
    assert counts.n_in == counts.kept + sum(counts.rejected.values()) + sum(counts.errored.values())


def test_shouting_rule_hand_worked():
    _import_plugin()
    from datapipe.stages import get

    t = get("shouting", max_upper_frac=0.5, min_letters=5).apply(["THIS IS ALL SHOUTED", "Calm text here", "OK"])
    assert t.column("reject_reason").to_pylist() == ["shouting:upper_frac", None, None]
    assert t.column("shouting_upper_frac").to_pylist()[1] == pytest.approx(1 / 12)  # C of 12 cased letters


@pytest.mark.slow
def test_custom_stage_phase_as_a_user(tmp_path):
    """The script with its own LocalCluster: its workers register the plugin by re-importing it."""
    p = subprocess.run([sys.executable, str(EXAMPLES / "custom_stage_phase.py"), "--output", str(tmp_path / "o"),
                        "--limit", "20"], cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads((tmp_path / "o" / "doc_lengths" / "histogram.json").read_text())["documents"] > 0


@pytest.mark.slow
def test_cluster_launch(tmp_path):
    p = subprocess.run([sys.executable, str(EXAMPLES / "cluster_launch.py"), "--output", str(tmp_path / "c"),
                        "--limit", "20", "--input", str(shared_data() / "warc" / "dolma_wget_sample-0000.warc.gz")],
                       cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    ledger = json.loads((tmp_path / "c" / "ledger.json").read_text())
    assert ledger["stages"]["read"]["in"] > 0
