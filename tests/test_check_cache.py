"""check_before_work loads a stage config's assets once per process (datapipe/runner.py)."""
from __future__ import annotations

from datapipe import runner
from datapipe.manifest import validate_manifest
from datapipe.stage import registry


def _manifest(tmp_path, model_path: str):
    doc = tmp_path / "in.jsonl"
    doc.write_text('{"text": "one document"}\n')
    return validate_manifest({"name": "t", "inputs": {"paths": [str(doc)]}, "output": str(tmp_path / "out"),
                          "stages": [{"quality_classifier": {"model_path": model_path}}]}, "test")


def test_second_check_of_one_config_loads_nothing_and_another_env_checks_again(tmp_path, monkeypatch):
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

    monkeypatch.setattr(runner, "_CHECKED", set())
    m = _manifest(tmp_path, str(tmp_path / "absent.ftz"))
    for _ in range(2):
        with pytest.raises(Exception, match="absent.ftz"):
            runner.check_before_work(m)
