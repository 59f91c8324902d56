"""A setting or argument naming a file that is not there: one line saying what to fix, exit 2.

Walked as a class, not case by case: every path setting of every registered stage and phase
section (found from the pydantic config classes, ``datapipe.manifest.path_settings``), and every
command-line argument that names something to read (found from the argparse tree). A new path
setting or argument that the walk does not cover fails the discovery tests below.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

import pytest

from datapipe.cli import main as cli
from datapipe.manifest.path_settings import path_fields
from datapipe.phase import section_classes
from datapipe.stage import registry

REPO = Path(__file__).resolve().parent.parent
#: Config field names that name a file or folder (the ``*_path`` / ``*_dir`` / ``*file*`` family).
PATHY_FIELD = re.compile(r"(^|_)(path|paths|dir|dirs|file|files|model|vocab|merges|tokenizer)$|file")
MISSING = "missing-folder/nope"


def _missing_value(setting, is_list: bool, key: tuple):
    v = f"{MISSING}.json" if key[-1] == "tokenizer" else (f"{MISSING}.ftz" if setting.kind == "file" else MISSING)
    return [v] if is_list else v


def _settings():
    """``(id, manifest fragment, missing value)`` for every marked setting."""
    out = []
    for name, cls in sorted(registry().items()):
        for key, setting, is_list in path_fields(cls.Config):
            cfg: dict = {}
            node = cfg
            for k in key[:-1]:
                node = node.setdefault(k, {})
            node[key[-1]] = _missing_value(setting, is_list, key)
            out.append((f"{name}.{'.'.join(key)}", {"stages": [{name: cfg}]}, node[key[-1]]))
    for name, cls in sorted(section_classes().items()):
        for key, setting, is_list in path_fields(cls):
            cfg = {"tokenizer": "gpt2_bpe"} if name == "tokenize" and key[-1] in ("vocab", "merges") else {}
            node = cfg
            for k in key[:-1]:
                node = node.setdefault(k, {})
            node[key[-1]] = _missing_value(setting, is_list, key)
            out.append((f"{name}.{'.'.join(key)}", {name: cfg}, node[key[-1]]))
    return out


SETTINGS = _settings()


def test_every_path_like_config_field_is_marked():
    """A field named like a path (or typed Path) that is not marked would escape both the
    manifest-relative resolution and this walk."""
    unmarked = []
    classes = [(f"stage {n}", c.Config) for n, c in registry().items()] + list(section_classes().items())
    for label, cls in classes:
        marked = {k[0] for k, _, _ in path_fields(cls)}
        for fname, info in cls.model_fields.items():
            if (PATHY_FIELD.search(fname) or "Path" in str(info.annotation)) and fname not in marked:
                unmarked.append(f"{label}.{fname}")
    assert not unmarked, unmarked
    ids = {s[0] for s in SETTINGS}
    assert {"quality_classifier.model_path", "nsfw.model_path", "toxicity.model_path", "topic.model_path",
            "langid.model", "url_blocklist.ut1_path", "dedup.reference_dirs", "tokenize.tokenizer"} <= ids


def _one_error_line(capsys) -> str:
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1, err
    return err[0]


@pytest.fixture
def env(tmp_path, monkeypatch, data_dir, lid_model):
    monkeypatch.setenv("COLUMNS", "10000")  # no wrapping by rich: a line is a line
    monkeypatch.setenv("DATAPIPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return {"warc": str(data_dir / "warc" / "resiliparse_CC-MAIN-2020-34_excerpt.warc.gz"), "tmp": tmp_path}


def _manifest(env, fragment: dict) -> Path:
    m = {"name": "t", "inputs": {"paths": [env["warc"]]}, "output": str(env["tmp"] / "out"),
         "cluster": {"workers": 1, "dashboard_address": "127.0.0.1:0"}, **fragment}
    path = env["tmp"] / "job" / "m.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(m))
    return path


@pytest.mark.parametrize("sid,fragment,missing", SETTINGS, ids=[s[0] for s in SETTINGS])
def test_a_missing_file_setting_is_one_line_exit_2(sid, fragment, missing, env, capsys):
    m = _manifest(env, fragment)
    assert cli.main(["run", str(m), "--dry-run"]) == 2
    line = _one_error_line(capsys)
    name = missing[0] if isinstance(missing, list) else missing
    assert line.startswith("error: ") and Path(name).name in line, line
    assert str(m) in line and sid.split(".")[0] in line  # where: the manifest and the stage or section
    assert not (env["tmp"] / "out").exists()


@pytest.mark.parametrize("stage", ["quality_classifier", "nsfw", "toxicity", "topic"])
def test_a_missing_fasttext_model_stops_a_real_run(stage, env, capsys):
    m = _manifest(env, {"stages": [{"extract": {}}, {stage: {"model_path": "nope.ftz"}}]})
    assert cli.main(["run", str(m)]) == 2
    line = _one_error_line(capsys)
    assert re.search(rf"m\.yaml:\d+: stages\[1\]\.{stage}: fastText model nope\.ftz not found", line), line
    assert "DATAPIPE_MODELS" not in line and "models/nope.ftz" in line  # the places looked at, resolved
    assert not (env["tmp"] / "out" / "documents").exists()


def test_fasttext_models_are_found_in_datapipe_models(env, monkeypatch, capsys):
    models = env["tmp"] / "my-models"
    models.mkdir()
    shutil.copy(REPO / "classifiers" / "models" / "quality_wiki_cc.ftz", models / "mine.ftz")
    shutil.copy(REPO / "classifiers" / "models" / "quality_wiki_cc.json", models / "mine.json")
    from datapipe.env import models_dir

    shutil.copy(models_dir() / "lid.176.ftz", models / "lid.176.ftz")  # langid reads it from there too
    monkeypatch.setenv("DATAPIPE_MODELS", str(models))
    m = _manifest(env, {"stages": [{"extract": {}}, {"quality_classifier": {"model_path": "mine.ftz"}}]})
    assert cli.main(["run", str(m), "--dry-run"]) == 0, capsys.readouterr().err
    from datapipe.classifiers.model import resolve_model_path

    assert resolve_model_path("mine.ftz") == models / "mine.ftz"


# ------------------------------------------------------------------ command-line arguments

#: Argument names (dest) of things a command reads; outputs (--out, --output) and init's folder are written.
READ_DEST = re.compile(r"^(manifest|input|run_dir|run|index|model|positives|negatives|sources|files|"
                       r"tokenizer|tokenizer_arg|.*_(path|dir|file))$")


def _read_arguments() -> set[tuple[str, str]]:
    found = set()

    def walk(parser, prefix):
        seen = set()
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    if id(sp) not in seen:  # an alias (eval = evaluate) is the same parser
                        seen.add(id(sp))
                        walk(sp, [*prefix, name])
            elif a.nargs != 0 and READ_DEST.match(a.dest) and prefix != ["init"]:
                found.add((" ".join(prefix), a.dest))
    walk(cli.build_parser(), [])
    return found


def _cli_cases(env) -> dict[tuple[str, str], list[str]]:
    t = env["tmp"]
    miss = str(t / MISSING)
    ok_manifest = str(_manifest(env, {"stages": [{"extract": {}}]}))
    src = t / "texts.txt"
    src.write_text("a line of text to read\nanother line\n")
    q = str(t / "q.ftz")
    return {
        ("run", "manifest"): ["run", miss + ".yaml"],
        ("run", "input"): ["run", ok_manifest, "--input", miss + ".warc.gz", "--dry-run"],
        ("classifiers train", "positives"): ["classifiers", "train", "quality", "--positives", miss,
                                             "--negatives", str(src), "--out", q],
        ("classifiers train", "negatives"): ["classifiers", "train", "quality", "--positives", str(src),
                                             "--negatives", miss, "--out", q],
        ("classifiers train", "sources"): ["classifiers", "train", "toxicity", "--sources", miss, "--out", q],
        ("classifiers evaluate", "model"): ["classifiers", "evaluate", "--model", miss + ".ftz",
                                            "--positives", str(src)],
        ("classifiers evaluate", "positives"): ["classifiers", "evaluate", "--model", "quality_wiki_cc.ftz",
                                                "--positives", miss],
        ("classifiers evaluate", "negatives"): ["classifiers", "evaluate", "--model", "quality_wiki_cc.ftz",
                                                "--negatives", miss],
        ("classifiers predict", "model"): ["classifiers", "predict", "--model", miss + ".ftz", str(src)],
        ("classifiers predict", "files"): ["classifiers", "predict", "--model", "quality_wiki_cc.ftz", miss + ".txt"],
        ("tokenizer train", "run_dir"): ["tokenizer", "train", miss, "--out", str(t / "tok.json")],
        ("tokenizer info", "tokenizer_arg"): ["tokenizer", "info", miss + ".json"],
        ("tokenizer info", "tokenizer"): ["tokenizer", "info", "--tokenizer", miss + ".json"],
        ("tokenizer encode", "tokenizer"): ["tokenizer", "encode", "--tokenizer", miss + ".json", "hello"],
        ("inspect", "run_dir"): ["inspect", miss],
        ("report", "run_dir"): ["report", miss],
        ("ablate", "manifest"): ["ablate", miss + ".yaml"],
        ("ablate", "run"): ["ablate", str(REPO / "manifests" / "ablation.yaml"), "--run", miss],
        ("export-tokens", "index"): ["export-tokens", miss + "/index.json", "--out", str(t / "export")],
    }


def test_every_read_argument_is_walked(env):
    assert _read_arguments() == set(_cli_cases(env))


def test_a_missing_path_argument_is_one_line_exit_2(env, capsys):
    bad = []
    for (cmd, dest), argv in sorted(_cli_cases(env).items()):
        rc = cli.main(argv)
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        if rc != 2 or len(err) != 1 or MISSING not in err[0] or not err[0].startswith("error: "):
            bad.append((cmd, dest, rc, err[:3]))
    assert not bad, bad
