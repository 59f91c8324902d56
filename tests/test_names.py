"""Names that round-trip: one ``stage:reason`` spelling from the funnel to ``inspect --reason``,
"did you mean" for typed stage, setting and reason names (never pydantic's raw text), phase
sections listed by ``datapipe stages``, ids that fit an 80-column table and are accepted back as a
prefix by ``inspect --doc``."""
from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest
from rich.console import Console
from rich.text import Text

import datapipe
from datapipe.cli import main as cli
from datapipe.inspect import reader as I
from datapipe.manifest.load import ManifestError, load_manifest
from datapipe.stage import registry

RAW = "Extra inputs are not permitted"


def _manifest(tmp_path, body: str):
    p = tmp_path / "m.yaml"
    p.write_text("inputs: {paths: [x]}\noutput: o\n" + body)
    with pytest.raises(ManifestError) as e:
        load_manifest(p)
    return str(e.value)


def test_every_rule_reason_is_spelled_stage_colon_rule():
    reg = registry()
    for name, cls in reg.items():
        for rule in cls.rules:
            if rule.reason_from:  # "<stage>:" + the first item of a stored column
                assert rule.reason == name, (name, rule)
                continue
            stage, sep, part = rule.reason.partition(":")
            assert sep and stage == name and part, (name, rule.reason)
    assert [r.reason for r in reg["c4"].rules if "curly" in r.reason] == ["c4:curly_bracket"]
    assert reg["c4"].version == 2  # the reason a rerun stores changed: lineage recomputes c4


def test_funnel_prints_the_reason_inspect_takes():
    from datapipe.cli.termfmt import funnel_rows

    stages = [{"stage": "c4", "in": 10, "kept": 7, "rejected": [{"reason": "c4:min_sentences", "count": 3}],
               "errored": [], "seconds": 0.1}]
    _, rows, is_reason = funnel_rows(stages, ())
    assert [r[0] for r, flag in zip(rows, is_reason) if flag] == ["  c4:min_sentences"]
    run = SimpleNamespace(ledger=SimpleNamespace(stages={"c4": SimpleNamespace(rejected={"c4:min_sentences": 3},
                                                                               errored={})}))
    with pytest.raises(I.InspectError, match=r"did you mean 'c4:min_sentences'\?"):
        I._kind_of_reason(run, "min_sentences")
    with pytest.raises(I.InspectError, match=r"did you mean 'c4:min_sentences'\?"):
        I._kind_of_reason(run, "c4:min_sentence")


def test_manifest_typos_name_the_closest_stage_and_setting(tmp_path):
    msg = _manifest(tmp_path, "stages:\n  - gopher_qualty: {}\n")
    assert ":4:" in msg and "unknown stage 'gopher_qualty'; did you mean 'gopher_quality'?" in msg
    msg = _manifest(tmp_path, "stages:\n  - gopher_quality: {min_word: 5}\n")
    assert "stages[0].gopher_quality.min_word: unknown setting 'min_word'; did you mean 'min_words'?" in msg
    assert "min_stop_words" in msg and RAW not in msg  # the known settings are listed
    msg = _manifest(tmp_path, "dedup:\n  minhash: {treshold: 0.8}\n")
    assert "dedup.minhash.treshold: unknown setting 'treshold'; did you mean 'threshold'?" in msg and RAW not in msg
    msg = _manifest(tmp_path, "dedpu: {}\n")
    assert "unknown setting 'dedpu'; did you mean 'dedup'?" in msg and RAW not in msg


def test_python_and_what_if_typos_are_one_line_with_a_suggestion():
    from datapipe import stages
    from datapipe.inspect.rules import decider_for

    with pytest.raises(KeyError, match=r"did you mean 'gopher_quality'\?"):
        stages.get("gopher_qualty")
    with pytest.raises(ValueError) as e:
        stages.get("gopher_quality", min_word=5)
    assert "gopher_quality.min_word: unknown setting 'min_word'; did you mean 'min_words'?" in str(e.value)
    assert RAW not in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError) as e:
        datapipe.dedup(["a b c"], config={"minhash": {"treshold": 0.8}})
    assert "dedup.minhash.treshold: unknown setting 'treshold'; did you mean 'threshold'?" in str(e.value)
    assert RAW not in str(e.value)
    with pytest.raises(I.InspectError) as e:
        decider_for("langid", {}, {"min_scor": 0.9})
    assert "did you mean 'min_score'?" in str(e.value) and RAW not in str(e.value)


def test_stages_lists_phase_sections(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert cli.main(["stages", "dedup"]) == 0
    text = capsys.readouterr().out
    assert "dedup ─" in text or "dedup (phase section" in text
    for setting in ("minhash.threshold", "minhash.num_perm", "exact", "lines.enabled"):
        assert setting in text, setting
    assert cli.main(["stages", "--json"]) == 0
    cat = json.loads(capsys.readouterr().out)
    secs = {s["name"]: s for s in cat if s["kind"] == "phase section"}
    from datapipe.phase import section_classes
    from datapipe.stages.phases.dedup.config import DedupConfig

    assert set(secs) == set(section_classes())
    th = next(f for f in secs["dedup"]["config"] if f["field"] == "minhash.threshold")
    assert th["default"] == DedupConfig().minhash.threshold and th["range"] == "(0, 1)"
    assert cli.main(["stages", "dedpu"]) == 2
    assert "did you mean 'dedup'?" in capsys.readouterr().err


def test_where_table_fits_80_columns_with_short_ids():
    from datapipe.cli.inspect import _show_where

    ids = ["00010d21e48549b2c7766f8c76a574b4", "0a8f6c3e2b1d4f5a6b7c8d9e0f1a2b3c"]
    res = {"kind": "rejected", "where": "true", "count": 2, "columns": ["id", "url", "reject_reason"],
           "rows": [{"id": i, "url": f"https://example.org/page/{k}", "reject_reason": "gopher_quality:min_words"}
                    for k, i in enumerate(ids)]}
    out = Console(file=io.StringIO(), width=80, force_terminal=False)
    _show_where(out, res)
    lines = out.file.getvalue().splitlines()
    for i in ids:
        row = [ln for ln in lines if i[:12] in ln]
        assert len(row) == 1 and i not in row[0] and "gopher_quality:min_words" in row[0], lines
    assert all(Text(ln).cell_len <= 80 for ln in lines)
    assert "--doc takes such a prefix" in lines[-1]


def test_doc_accepts_an_unambiguous_id_prefix(small_stages_run, capsys):
    from datapipe.inspect.ids import resolve_id

    run_dir = small_stages_run[1]
    run = I.Run.open(str(run_dir))
    ids = sorted(run.query(f"SELECT id FROM {run.source('kept')}").column("id").to_pylist())
    target = ids[0]
    k = next(n for n in range(4, len(target)) if sum(i.startswith(target[:n]) for i in ids) == 1)
    assert resolve_id(run, target[:max(k, 12)]) == target and resolve_id(run, target) == target
    assert cli.main(["inspect", str(run_dir), "--doc", target[:12], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == target
    with pytest.raises(I.InspectError, match="at least 4 characters"):
        resolve_id(run, "0")
    shared = next((p for p in (target[:n] for n in range(4, 8)) if sum(i.startswith(p) for i in ids) > 1), None)
    if shared is not None:
        with pytest.raises(I.InspectError, match="ambiguous"):
            resolve_id(run, shared)
