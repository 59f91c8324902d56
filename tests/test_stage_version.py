"""Stage versions in lineage (``Stage.version``, ``task.stage_identity``): a rerun into an output
written by an older version of a stage's code recomputes from that stage on, as a fresh run does.

Before stages had versions, fingerprints covered the stage configs and ``SCHEMA_VERSION`` only: a
rerun after a code change that moved a stage's decisions reused the stored ones and differed from
a fresh run (found in session 5; the remedy then was a global schema bump).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pytest

from datapipe.engine.task import KINDS, run_file_task
from datapipe.engine.task_plan import SCHEMA_VERSION, plan_specs, prefix_fingerprints
from datapipe.io.paths import canonical_input, input_identity
from datapipe.stage import REJECT, registry, with_column

CHAIN = [{"fineweb": {}}, {"gopher_quality": {"min_words": 5, "min_stop_words": 0}}, {"gopher_repetition": {}}]


def _h(obj) -> str:  # the fingerprint formula, written out independently
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def test_version_one_stages_keep_their_fingerprints():
    read = {"input": {"path": "x"}, "format": "jsonl"}
    want = [_h({"v": SCHEMA_VERSION, "read": read})]
    for item in CHAIN:
        want.append(_h([want[-1], item]))
    assert prefix_fingerprints(read, CHAIN) == want


def test_a_bumped_version_changes_that_stage_and_later_fingerprints_only(monkeypatch):
    read = {"input": {"path": "x"}, "format": "jsonl"}
    before = prefix_fingerprints(read, CHAIN)
    monkeypatch.setattr(registry()["gopher_quality"], "version", 2)
    after = prefix_fingerprints(read, CHAIN)
    # prefix[i] is the state after i stages: gopher_quality is stage 1, so prefix[0:2] stay.
    assert after[:2] == before[:2]
    assert all(a != b for a, b in zip(after[2:], before[2:]))
    assert after[2] == _h([after[1], [CHAIN[1], {"version": 2}]])


def _docs() -> list[dict]:
    words = "river stone bridge lantern window garden market harbour meadow orchard village teacher".split()
    return [{"id": f"d{i:02d}", "text": " ".join(words[: 4 + i % 9]).capitalize() + ".",
             "url": f"https://site{i % 3}.example/p{i}"} for i in range(30)]


def _run(inp: str, out: Path) -> dict:
    (spec,) = plan_specs([inp], str(out), CHAIN, "", fmt="jsonl", batch_size=8,
                         identities={inp: input_identity(inp)})
    return run_file_task(spec)


def _shards(out: Path) -> dict[str, bytes]:
    return {f"{kind}/{p.name}": p.read_bytes() for kind in KINDS.values() for p in sorted((out / kind).glob("*.parquet"))}


@pytest.mark.parametrize("bump", [True, False])
def test_rerun_after_a_stage_code_change_equals_a_fresh_run_when_versioned(tmp_path, monkeypatch, bump):
    inp = tmp_path / "docs.jsonl"
    inp.write_text("".join(json.dumps(d) + "\n" for d in _docs()))
    inp = canonical_input(str(inp))
    out = tmp_path / "out"
    _run(inp, out)
    # "New code": gopher_quality now also rejects pages of site0 (a rule added to the stage).
    cls = registry()["gopher_quality"]
    real = cls.__call__

    def changed(self, batch: pa.Table) -> pa.Table:
        batch = real(self, batch)
        reasons = [r if r is not None or "site0." not in u else "gopher_quality:new_rule"
                   for r, u in zip(batch.column(REJECT).to_pylist(), batch.column("url").to_pylist())]
        return with_column(batch, REJECT, reasons, pa.string())

    monkeypatch.setattr(cls, "__call__", changed)
    if bump:
        monkeypatch.setattr(cls, "version", 2)
    _run(inp, out)
    _run(inp, tmp_path / "fresh")
    if bump:
        assert _shards(out) == _shards(tmp_path / "fresh")
    else:  # what versions are for: unversioned, the rerun reuses the old decisions
        assert _shards(out) != _shards(tmp_path / "fresh")


def test_records_without_versions_count_as_version_one(monkeypatch):
    from datapipe.engine.task_reuse import unchanged_stages

    assert unchanged_stages({"stages": CHAIN}, CHAIN) == [True, True, True]
    monkeypatch.setattr(registry()["gopher_quality"], "version", 2)
    assert unchanged_stages({"stages": CHAIN}, CHAIN) == [True, False, True]
    assert unchanged_stages({"stages": CHAIN, "stage_versions": [1, 2, 1]}, CHAIN) == [True, True, True]
