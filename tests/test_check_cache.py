"""check_before_work loads a stage config's assets once per process (datapipe/engine/runner.py), and once
per size + mtime of its asset files across processes (datapipe/engine/check_cache.py)."""
from __future__ import annotations

import shutil
import sys

from datapipe.engine import runner
from datapipe.manifest.load import validate_manifest
from datapipe.stage import registry


def _manifest(tmp_path, model_path: str):
    doc = tmp_path / "in.jsonl"
    doc.write_text('{"text": "one document"}\n')
    return validate_manifest({"name": "t", "inputs": {"paths": [str(doc)]}, "output": str(tmp_path / "out"),
                          "stages": [{"quality_classifier": {"model_path": model_path}}]}, "test")


def test_second_check_of_one_config_loads_nothing_and_another_env_checks_again(tmp_path, monkeypatch):
    monkeypatch.setenv("DATAPIPE_CACHE", str(tmp_path / "cache"))  # no entry from an earlier process
    cls = registry()["quality_classifier"]
    calls = []
    real = cls.check
    monkeypatch.setattr(cls, "check", lambda self: (calls.append(self.config.model_path), real(self)))
    monkeypatch.setattr(runner, "_CHECKED", set())
    m = _manifest(tmp_path, "quality_wiki_cc.ftz")
    runner.check_before_work(m)
    runner.check_before_work(m)
    assert calls == ["quality_wiki_cc.ftz"]
    monkeypatch.setenv("DATAPIPE_MODELS", str(tmp_path))  # assets may resolve elsewhere: checked again
    runner.check_before_work(m)
    assert len(calls) == 2


def test_a_failed_check_is_not_remembered(tmp_path, monkeypatch):
    import pytest

    monkeypatch.setenv("DATAPIPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(runner, "_CHECKED", set())
    m = _manifest(tmp_path, str(tmp_path / "absent.ftz"))
    for _ in range(2):
        with pytest.raises(Exception, match="absent.ftz"):
            runner.check_before_work(m)


def _counting(monkeypatch, name):
    cls = registry()[name]
    calls = []
    real = cls.check
    monkeypatch.setattr(cls, "check", lambda self: (calls.append(1), real(self)))
    return calls


def test_check_is_remembered_across_processes_until_the_model_file_changes(tmp_path, monkeypatch):
    """Issue 16: a model is loaded on the client once per identity (size, mtime) of its file, not
    in every run; a touched, replaced or removed file is checked again."""
    import os
    import shutil

    import pytest

    from datapipe.classifiers import model as loader

    monkeypatch.setenv("DATAPIPE_CACHE", str(tmp_path / "cache"))
    model = tmp_path / "q.ftz"
    shutil.copy(loader.MODELS_DIR / "quality_wiki_cc.ftz", model)
    calls = _counting(monkeypatch, "quality_classifier")
    m = _manifest(tmp_path, str(model))

    def new_process():  # what a later `datapipe run` starts with: nothing checked or loaded in memory
        monkeypatch.setattr(runner, "_CHECKED", set())
        monkeypatch.setattr(loader, "_CACHE", {})
        runner.check_before_work(m)

    new_process()
    new_process()
    assert len(calls) == 1 and (tmp_path / "cache" / "checked-stages.json").is_file()
    st = model.stat()
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # same bytes, new mtime
    new_process()
    new_process()
    assert len(calls) == 2
    model.write_bytes(b"not a model")  # replaced: checked, and the check fails with the stage's error
    with pytest.raises(Exception):
        new_process()
    model.unlink()
    with pytest.raises(Exception, match="q.ftz"):
        new_process()
    assert len(calls) == 4


def test_a_stage_without_assets_is_checked_in_every_process(tmp_path, monkeypatch):
    monkeypatch.setenv("DATAPIPE_CACHE", str(tmp_path / "cache"))
    calls = _counting(monkeypatch, "pii")
    doc = tmp_path / "in.jsonl"
    doc.write_text('{"text": "one document"}\n')
    m = validate_manifest({"name": "t", "inputs": {"paths": [str(doc)]}, "output": str(tmp_path / "out"),
                           "stages": [{"pii": {}}]}, "test")
    for _ in range(2):
        monkeypatch.setattr(runner, "_CHECKED", set())
        runner.check_before_work(m)
    assert registry()["pii"]().assets() is None and len(calls) == 2


def test_the_sandbox_start_check_is_remembered_until_its_files_change(tmp_path, monkeypatch):
    """Issue 16: ``extract`` named no assets, so every run's client started an extraction sandbox
    child to check it (~1 s). It names the files the child starts from; a changed one (here the
    sandbox module, copied and touched) checks again, and so does another interpreter."""
    import os

    from datapipe.stages.lib import extract_sandbox

    monkeypatch.setenv("DATAPIPE_CACHE", str(tmp_path / "cache"))
    module = tmp_path / "extract_sandbox.py"
    shutil.copy(extract_sandbox.__file__, module)
    monkeypatch.setattr(extract_sandbox, "__file__", str(module))
    starts = []
    real = extract_sandbox.Sandbox._start
    monkeypatch.setattr(extract_sandbox.Sandbox, "_start", lambda self: (starts.append(1), real(self)))
    doc = tmp_path / "in.jsonl"
    doc.write_text('{"text": "one document"}\n')

    def new_process(stages):
        monkeypatch.setattr(runner, "_CHECKED", set())
        runner.check_before_work(validate_manifest({"name": "t", "inputs": {"paths": [str(doc)]},
                                                    "output": str(tmp_path / "out"), "stages": stages}, "test"))

    new_process([{"extract": {}}])
    new_process([{"extract": {}}])
    assert len(starts) == 1
    st = module.stat()
    os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    new_process([{"extract": {}}])
    assert len(starts) == 2
    monkeypatch.setattr(sys, "executable", sys.executable + "-other")  # the key holds the interpreter
    monkeypatch.setattr(extract_sandbox.Sandbox, "_start", lambda self: starts.append(1))
    new_process([{"extract": {}}])
    assert len(starts) == 3
    new_process([{"extract": {"sandbox": False}}])  # no child to start: nothing to check but config and code
    assert len(starts) == 3 and registry()["extract"](registry()["extract"].Config(sandbox=False)).assets() == []


def test_every_asset_of_the_main_chain_resolves():
    """The stages of the main manifest that load files name them (so their checks are cached),
    and each named file exists."""
    from pathlib import Path

    from datapipe.manifest.load import load_manifest

    m = load_manifest(Path(__file__).resolve().parent.parent / "manifests" / "cc-2026.yaml",
                      {"inputs.paths": ["x.warc.gz"], "inputs.crawl": None})
    named = {st.name: st.assets() for st in m.build_stages()}
    for name in ("extract", "langid", "url_blocklist", "quality_classifier", "toxicity", "nsfw", "profanity"):
        assert named[name], name
        assert all(Path(p).exists() for p in named[name]), name
