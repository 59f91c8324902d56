"""`datapipe stages`, `datapipe schema`, `datapipe init` and `inspect --where` without a kind: no run needed."""
from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest
import yaml
from rich.cells import cell_len

from datapipe.cli import main as cli
from datapipe.manifest.load import load_manifest
from datapipe.stage import registry

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def schema():
    from datapipe.cli.catalog import manifest_schema

    s = manifest_schema()
    jsonschema.Draft202012Validator.check_schema(s)
    return s


def _errors(schema, data) -> list[str]:
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(data)]


def test_schema_accepts_what_load_manifest_accepts(schema, capsys, tmp_path):
    assert cli.main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == schema
    assert cli.main(["schema", "--out", str(tmp_path / "s.json")]) == 0
    assert json.loads((tmp_path / "s.json").read_text()) == schema
    main = yaml.safe_load((REPO / "manifests" / "cc-2026.yaml").read_text())
    assert _errors(schema, main) == []
    assert _errors(schema, dict(main, report={"enabled": False, "log_y": "always"})) == []
    for bad in (dict(main, stages=[{"langid": {"min_score": 2}}]),     # out of range
                dict(main, stages=[{"os.system": {}}]),                 # not a stage
                dict(main, stages=[{"langid": {"min_scor": 0.5}}]),     # a typo
                dict(main, dedup={"minhash": {"num_perm": 1}}),          # phase section range
                dict(main, surprise=1)):                                # unknown top-level key
        assert _errors(schema, bad), bad
    assert set(schema["properties"]) >= {"inputs", "output", "stages", "dedup", "mix", "tokenize", "report"}
    assert "sections" not in schema["properties"] and "source_file" not in schema["properties"]
    names = [i["title"] for i in schema["properties"]["stages"]["items"]["oneOf"]]
    assert sorted(names) == sorted(registry())


@pytest.mark.parametrize("preset", ["fineweb", "dclm", "c4"])
def test_init_writes_a_loadable_commented_preset(preset, schema, tmp_path, capsys):
    d = tmp_path / preset
    assert cli.main(["init", str(d), "--preset", preset]) == 0
    text = (d / "manifest.yaml").read_text()
    assert text.count("#") > 10  # commented: where each setting comes from
    m = load_manifest(d / "manifest.yaml")
    assert m.name == preset and m.stages and m.section("dedup") is not None
    assert _errors(schema, yaml.safe_load(text)) == []
    assert json.loads((d / "datapipe.formats.documents.json").read_text()) == schema  # the modeline's target
    assert f"datapipe run {d}/manifest.yaml --limit 100" in " ".join(capsys.readouterr().out.split())
    assert cli.main(["init", str(d), "--preset", preset]) == 2  # no silent overwrite
    assert "exists" in capsys.readouterr().err
    assert cli.main(["init", str(d), "--preset", preset, "--force", "--input", "data/a b,[1].jsonl"]) == 0
    # typed relative to the working directory, written relative to the manifest, read back as the same file
    assert load_manifest(d / "manifest.yaml").inputs.paths == [os.path.abspath("data/a b,[1].jsonl")]


def test_presets_differ_where_their_recipes_do(tmp_path):
    from datapipe.cli.init import PRESETS, render

    ms = {}
    for p in PRESETS:
        (tmp_path / f"{p}.yaml").write_text(render(p))
        ms[p] = load_manifest(tmp_path / f"{p}.yaml")
    cfg = {p: {next(iter(s)): next(iter(s.values())) for s in m.stages} for p, m in ms.items()}
    assert cfg["c4"]["langid"]["min_score"] == 0.65 and cfg["c4"]["extract"]["main_content"] is False
    assert ms["c4"].section("dedup").lines.enabled and not ms["c4"].section("dedup").minhash.enabled
    assert ms["fineweb"].section("dedup").minhash.band_rows() == (14, 8)
    assert "fineweb" in cfg["fineweb"] and "quality_classifier" in cfg["dclm"]


def test_stages_lists_every_field_with_default_and_range(capsys, monkeypatch):
    assert cli.main(["stages", "--json"]) == 0
    cat = {s["name"]: s for s in json.loads(capsys.readouterr().out) if s["kind"] == "stage"}
    assert set(cat) == set(registry())
    for name, cls in registry().items():
        fields = {f["field"]: f for f in cat[name]["config"]}
        assert list(fields) == list(cls.Config.model_fields), name
        required = [f for f, info in cls.Config.model_fields.items() if info.is_required()]
        assert [f for f in fields if fields[f]["required"]] == required
        if not required:  # the defaults as a manifest would write them
            assert {f: v["default"] for f, v in fields.items()} == cls.Config().model_dump(mode="json"), name
        assert cat[name]["source"].split(":")[0].endswith(".py") and cat[name]["doc"], name
    gq = {f["field"]: f for f in cat["gopher_quality"]["config"]}
    assert gq["min_words"]["range"] == ">= 0" and gq["min_alpha_words_ratio"]["range"] == "[0, 1]"
    assert gq["min_words"]["type"] == "int | None" and cat["gopher_quality"]["reads"] == ["lang"]
    assert {f["field"]: f for f in cat["extract"]["config"]}["timeout_s"]["range"] == "> 0"
    assert cat["gopher_quality"]["source"].startswith("stages/gopher.py:")
    assert cat["gopher_quality"]["rules"][:2] == [  # the declared rules, in the order they are tried
        {"reason": "gopher_quality:word_count", "column": "gopher_word_count", "op": "<", "threshold": "min_words",
         "rule": "gopher_word_count < min_words"},
        {"reason": "gopher_quality:word_count", "column": "gopher_word_count", "op": ">", "threshold": "max_words",
         "rule": "gopher_word_count > max_words"}]
    assert cat["extract"]["rules"] == []
    monkeypatch.setenv("COLUMNS", "80")
    assert cli.main(["stages"]) == 0
    text = capsys.readouterr().out
    assert all(cell_len(x) <= 80 for x in text.splitlines())
    for name in registry():
        assert f"{name} ─" in text
    assert "dict[str, float | None]" in text  # types are not eaten as markup
    assert cli.main(["stages", "gopher_quality"]) == 0
    text = capsys.readouterr().out
    assert "stop_words" in text and "rejects gopher_quality:stop_words: gopher_stop_word_count < min_stop_words" in text
    assert cli.main(["stages", "nope"]) == 2


def test_inspect_where_without_a_kind_is_an_error(tmp_path, capsys):
    assert cli.main(["inspect", str(tmp_path), "--where", "lang = 'de'"]) == 2
    assert "--where needs --kept, --rejected or --errors" in capsys.readouterr().err
    # an explicit "--where true" was taken for the default and the funnel printed
    assert cli.main(["inspect", str(tmp_path), "--where", "true"]) == 2
    assert "--where needs --kept, --rejected or --errors" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["inspect", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    assert "--where is an error" in helptext and "one of them is required" in helptext


def test_unwritable_outputs_are_one_line_errors(tmp_path, capsys):
    """``schema --out`` and ``init`` where the path cannot be written: ``error: ...`` and exit 2, not a traceback."""
    a_file = tmp_path / "f.txt"
    a_file.write_text("x")
    cases = [(["schema", "--out", str(tmp_path / "no" / "s.json")],
              f"error: cannot write the schema: {tmp_path / 'no' / 's.json'}: No such file or directory"),
             (["schema", "--out", str(tmp_path)], f"error: cannot write the schema: {tmp_path}: Is a directory"),
             (["init", str(a_file)], f"error: cannot write the manifest: {a_file}: File exists"),
             (["init", str(a_file / "sub")], f"error: cannot write the manifest: {a_file / 'sub'}: Not a directory")]
    for argv, line in cases:
        assert cli.main(argv) == 2, argv
        assert " ".join(capsys.readouterr().err.split()) == line
    assert a_file.read_text() == "x"


def test_inspect_negative_counts_are_usage_errors(tmp_path, capsys):
    """``--sample -2`` was a numpy traceback, ``--limit -5`` a 'bad --where expression' from DuckDB."""
    for flag in ("--sample", "--limit"):
        with pytest.raises(SystemExit) as e:
            cli.main(["inspect", str(tmp_path), "--kept", flag, "-2"])
        assert e.value.code == 2
        assert capsys.readouterr().err.strip().endswith(f"error: argument {flag}: invalid count -2: a whole number >= 0")


def test_what_if_bad_value_is_one_line():
    """A what-if value of the wrong type names STAGE.FIELD, without pydantic's multi-line text and docs link."""
    from datapipe.inspect.reader import InspectError
    from datapipe.inspect.rules import decider_for

    with pytest.raises(InspectError) as e:
        decider_for("gopher_quality", {}, {"min_words": "abc"})
    assert str(e.value) == ("invalid config for what-if: gopher_quality.min_words: Input should be a valid integer, "
                            "unable to parse string as an integer")


def _subparsers(parser, path=()):
    """Every (command path, parser) of the CLI, nested subcommands included."""
    import argparse

    yield path, parser
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                if sub.prog.split()[-1] == name:  # aliases share a parser: visit it once
                    yield from _subparsers(sub, (*path, name))


def test_no_help_prints_a_default_of_none():
    """``ablate --help`` printed "(default: None)" for settings that come from the manifest."""
    from datapipe.ablate.manifest import AblationManifest, ClusterCfg

    helps = {" ".join(path): " ".join(p.format_help().split()) for path, p in _subparsers(cli.build_parser())}
    assert {"ablate", "inspect", "run", "tokenizer info", "classifiers train"} <= set(helps)
    assert [c for c, h in helps.items() if "None" in h] == []
    ab = helps["ablate"]
    fields, cluster = AblationManifest.model_fields, ClusterCfg.model_fields
    assert f"device:, default {fields['device'].default})" in ab and f"threads:, default {fields['threads'].default})" in ab
    assert f"cluster.workers:, default {cluster['workers'].default})" in ab
    assert fields["run"].is_required() and fields["budget_tokens"].is_required() and ab.count("required there") == 2


def test_inspect_funnel_names_missing_hosts(capsys):
    """Documents without a URL were listed under the host "None"."""
    from rich.console import Console

    from datapipe.cli.inspect import _show_funnel

    f = {"run": "r", "records_by_type": {"text": 3}, "stages": [], "limit": None,
         "totals": {"in": 3, "kept": 3, "rejected": 0, "errored": 0},
         "languages": [{"lang": "en", "docs": 3, "share": 1.0}],
         "hosts": [{"host": None, "docs": 2, "share": 2 / 3}, {"host": "a.org", "docs": 1, "share": 1 / 3}]}
    _show_funnel(Console(width=80), f)
    text = capsys.readouterr().out
    assert "(none)" in text and "None" not in text and "a.org" in text
