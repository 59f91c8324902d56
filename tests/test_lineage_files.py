"""File contents in lineage: a model retrained in place, a word list or reference set replaced,
must rerun what depends on it (datapipe/engine/check_cache.py content_digest, task_plan
stage_assets, Phase.config_fingerprint). Phase-1 tasks run in-process on a small JSONL file."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datapipe.engine import check_cache
from datapipe.engine.task import KINDS, run_file_task
from datapipe.engine.task_plan import plan_specs, stage_assets
from datapipe.io.paths import canonical_input, input_identity

MODELS = Path(__file__).resolve().parent.parent / "classifiers" / "models"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DATAPIPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(check_cache, "_HASHES", {})


def _jsonl(path: Path) -> str:
    texts = ["The committee met on Tuesday to discuss the new library budget and the opening hours.",
             "Click here to win a free prize now!!! Best deals, hot offers, subscribe today.",
             "Photosynthesis converts light energy into chemical energy stored in glucose molecules.",
             "lol ok see u later", "The river flows north through the valley before it reaches the sea."]
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    return canonical_input(str(path))


def _spec(inp: str, out: Path, stages: list[dict]):
    (spec,) = plan_specs([inp], str(out), stages, "", fmt="jsonl", batch_size=2,
                         identities={inp: input_identity(inp)}, assets=stage_assets(stages))
    return spec


def _shards(out: Path) -> dict[str, bytes]:
    return {f"{k}/{p.name}": p.read_bytes() for k in KINDS.values() for p in sorted((out / k).glob("*.parquet"))}


def _replace_keeping_stat(dst: Path, src: Path) -> None:
    """``dst`` gets ``src``'s bytes; its mtime is put back (a model retrained in place)."""
    st = dst.stat()
    shutil.copyfile(src, dst)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_model_retrained_in_place_reruns_its_stage(tmp_path):
    inp = _jsonl(tmp_path / "docs.jsonl")
    model = tmp_path / "models" / "clf.ftz"
    model.parent.mkdir()
    shutil.copyfile(MODELS / "quality_wiki_cc.ftz", model)
    shutil.copyfile(MODELS / "quality_wiki_cc.json", model.with_suffix(".json"))
    stages = [{"quality_classifier": {"model_path": str(model), "positive_label": "", "threshold": None,
                                      "languages": []}}]
    out = tmp_path / "out"
    first = run_file_task(_spec(inp, out, stages))
    before = pq.read_table(out / "_filtered" / f"{first['task_id']}.parquet").column("quality_score").to_pylist()
    # the same name now holds another model (the NSFW one, with its own sidecar)
    _replace_keeping_stat(model, MODELS / "nsfw_ut1_en.ftz")
    _replace_keeping_stat(model.with_suffix(".json"), MODELS / "nsfw_ut1_en.json")
    spec = _spec(inp, out, stages)
    assert spec.prefix[0] == first["prefix"][0] and spec.prefix[-1] != first["prefix"][-1]
    rerun = run_file_task(spec)
    assert not rerun.get("skipped")
    fresh = tmp_path / "fresh"
    run_file_task(_spec(inp, fresh, stages))
    assert _shards(out) == _shards(fresh)
    after = pq.read_table(out / "_filtered" / f"{first['task_id']}.parquet").column("quality_score").to_pylist()
    assert after != before  # the new model scored them


def test_word_list_replaced_in_place_changes_the_stage_fingerprint(tmp_path, data_dir):
    words = tmp_path / "ldnoobw"
    shutil.copytree(data_dir / "wordlists" / "ldnoobw", words)
    stages = [{"ldnoobw": {"words_dir": str(words)}}]
    before = stage_assets(stages)
    en = words / "en"
    text = en.read_text()
    # same size, mtime put back: only the bytes differ
    st = en.stat()
    en.write_text(text[::-1])
    os.utime(en, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert en.stat().st_size == st.st_size
    assert stage_assets(stages) != before


def test_digest_is_the_same_for_the_same_bytes_anywhere_and_reads_a_file_once(tmp_path, monkeypatch):
    a, b = tmp_path / "a" / "m.ftz", tmp_path / "b" / "m.ftz"
    for p in (a, b):
        p.parent.mkdir()
        shutil.copyfile(MODELS / "toxicity_weak_en.ftz", p)
    os.utime(b, ns=(1_000_000_000, 1_000_000_000))
    reads = []
    real = check_cache.sha256_file
    monkeypatch.setattr(check_cache, "sha256_file", lambda p, *k: (reads.append(p), real(p))[1])
    assert check_cache.content_digest([a]) == check_cache.content_digest([b])
    assert len(reads) == 2
    monkeypatch.setattr(check_cache, "_HASHES", {})   # another process: the cache file answers
    check_cache.content_digest([a])
    assert len(reads) == 2
    # the digest is the published sha256 of the file's bytes under its name
    import hashlib

    from datapipe.engine.lineage import fingerprint
    want = fingerprint([["m.ftz", hashlib.sha256(a.read_bytes()).hexdigest()]], length=16)
    assert check_cache.content_digest([a]) == want


def test_dedup_reference_contents_are_in_its_fingerprint(tmp_path):
    from datapipe.manifest.load import validate_manifest
    from datapipe.stages.phases.dedup.phase import DedupPhase

    ref = tmp_path / "ref"
    ref.mkdir()
    pq.write_table(pa.table({"id": ["r1"], "text": ["an earlier document"]}), ref / "a.parquet")
    doc = tmp_path / "in.jsonl"
    doc.write_text('{"text": "x"}\n')
    m = validate_manifest({"name": "t", "inputs": {"paths": [str(doc)]}, "output": str(tmp_path / "out"),
                           "stages": [], "dedup": {"reference_dirs": [str(ref)]}}, "test")
    fp = DedupPhase(m).config_fingerprint()
    assert DedupPhase(m).config_fingerprint() == fp
    pq.write_table(pa.table({"id": ["r1"], "text": ["another earlier one"]}), ref / "a.parquet")
    fp1 = DedupPhase(m).config_fingerprint()
    assert fp1 != fp
    pq.write_table(pa.table({"id": ["r2"], "text": ["a third"]}), ref / "b.parquet")  # a shard added
    assert DedupPhase(m).config_fingerprint() not in (fp, fp1)
    (ref / "b.parquet").unlink()
    assert DedupPhase(m).config_fingerprint() == fp1


def _plan_action(inp: Path, out: Path, identity: str) -> str:
    from datapipe.engine.plan import make_plan
    from datapipe.manifest.load import validate_manifest

    m = validate_manifest({"name": "t", "inputs": {"paths": [str(inp)], "identity": identity},
                           "output": str(out), "stages": [{"gopher_quality": {"min_words": 1}}]}, "test")
    (t,) = make_plan(m, [canonical_input(str(inp))]).tasks
    return t.action, t.why, t.spec


@pytest.mark.parametrize("identity, after", [("stat", "skip"), ("content", "read")])
def test_an_input_edited_in_place_with_size_and_mtime_restored(tmp_path, identity, after):
    """Default: path, size and mtime identify an input, so an edit that puts both back is not seen
    (as documented). ``inputs.identity: content`` hashes the bytes: the file is read again."""
    inp = tmp_path / "docs.jsonl"
    _jsonl(inp)
    out = tmp_path / "out"
    action, _, spec = _plan_action(inp, out, identity)
    assert action == "read"
    run_file_task(spec)
    assert _plan_action(inp, out, identity)[0] == "skip"
    st = inp.stat()
    data = inp.read_bytes()
    inp.write_bytes(data.replace(b"Tuesday", b"Fridays"))   # same length
    os.utime(inp, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (inp.stat().st_size, inp.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    action, why, _ = _plan_action(inp, out, identity)
    assert action == after, why
    if identity == "content":
        assert why == "input or read settings changed"
