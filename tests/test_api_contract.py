"""The Python API's contract without a reference run: validation and errors of ``Pipeline``,
``stages.get`` and ``apply``, the stages' declared ``reads``, the funnel at any width, and
``Pipeline.run`` from an unguarded script. (``test_api.py`` compares the API with a CLI run.)"""
from __future__ import annotations

import inspect
import io
import json
from pathlib import Path

import pyarrow as pa
import pytest
from rich.cells import cell_len

import datapipe
from datapipe.cli import main as cli
from datapipe.manifest.load import ManifestError


@pytest.fixture(scope="module")
def jsonl(data_dir) -> Path:
    return data_dir / "cc_text" / "dolma_cc_en_head-0091.jsonl.gz"


def test_funnel_keeps_numbers_on_any_width():
    from rich.console import Console

    from datapipe.cli.termfmt import ledger_stages, print_funnel
    from datapipe.engine.ledger import Ledger

    led = Ledger()
    led.record("read", 123_456_789, 100_000_000, ["non_document:request"] * 3, ["read:record_too_large"] * 2)
    led.stages["read"].rejected["non_document:request"] = 23_456_787
    led.record("gopher_repetition", 100_000_000, 99_999_000,
               ["gopher_repetition:a_very_long_reason_name_that_cannot_fit_anywhere_at_all"] * 1000)
    for width in (40, 60, 80, 120):
        buf = io.StringIO()
        print_funnel(Console(file=buf, width=width), ledger_stages(led))
        flat = " ".join(buf.getvalue().split())
        for n in ("123,456,789", "100,000,000", "23,456,787", "99,999,000", "1,000"):
            assert n in flat, (width, n)
        if width >= 80:
            assert all(cell_len(x) <= width for x in buf.getvalue().splitlines())
        if width == 80:
            assert "…" in buf.getvalue()  # the reason, not a number, gave way


def test_pipeline_is_validated_data():
    with pytest.raises(ManifestError, match="unknown stage 'os.system'"):
        datapipe.Pipeline(stages=["os.system"])
    with pytest.raises(ManifestError, match=r"stages\[0\].langid.min_score"):
        datapipe.Pipeline(stages=[("langid", {"min_score": 2})])
    with pytest.raises(TypeError, match="only plain data"):
        datapipe.Pipeline({"stages": [{"langid": {"model": object()}}]})
    with pytest.raises(ManifestError, match="unknown_key"):
        datapipe.Pipeline(stages=["langid"], unknown_key=1)
    with pytest.raises(ManifestError, match="needs inputs and output"):
        datapipe.Pipeline(stages=["langid"]).run()


def test_stage_get_and_apply_errors():
    with pytest.raises(KeyError, match="known stages"):
        datapipe.stages.get("nope")
    with pytest.raises(ValueError, match="min_words"):
        datapipe.stages.get("gopher_quality", min_words=-1)
    with pytest.raises(ValueError, match="url_blocklist decides from 'url'"):
        datapipe.stages.get("url_blocklist").apply(["some text"])
    with pytest.raises(ValueError, match="raw page"):
        datapipe.stages.get("extract").apply(pa.table({"text": ["already text"]}))
    with pytest.raises(ValueError, match="2 values for 1 rows"):
        datapipe.stages.get("gopher_quality").apply(["one text"], lang=["en", "de"])
    one = datapipe.stages.get("gopher_quality", min_words=3).apply("the cat and the dog sat", lang="en")
    assert one.num_rows == 1 and one.column("gopher_word_count").to_pylist() == [6]


def test_reads_match_the_stage_sources(capsys):
    """``reads`` is declared on the stage classes (it was a table in stage_apply) and is what their
    code reads; ``datapipe stages`` shows it."""
    from datapipe.api import stage_apply
    from datapipe.stage import Stage, registry

    assert not hasattr(stage_apply, "READS") and not hasattr(stage_apply, "REQUIRED")
    reg = registry()
    assert reg["gopher_quality"].reads == ("lang",) and reg["pii"].reads == ("lang", "host")
    assert reg["url_blocklist"].requires == ("url",) and reg["extract"].reads == ("record_type", "charset")
    assert cli.main(["stages", "--json"]) == 0
    cat = {s["name"]: s for s in json.loads(capsys.readouterr().out) if s["kind"] == "stage"}
    for name, cls in reg.items():
        declared = next(b for b in cls.__mro__ if "reads" in vars(b))
        assert declared is Stage or declared.__module__.startswith("datapipe.stages"), name
        assert set(cls.requires) <= set(cls.reads), name
        assert cat[name]["reads"] == list(cls.reads) and cat[name]["requires"] == list(cls.requires)
    assert cli.main(["stages", "url_blocklist"]) == 0
    assert "reads: text, url (required), host" in capsys.readouterr().out
    for name, cls in reg.items():
        src = inspect.getsource(inspect.getmodule(cls))
        body = inspect.getsource(cls) + "".join(inspect.getsource(b) for b in cls.__mro__[1:-1]
                                               if b.__module__.startswith("datapipe.stages"))
        uses_lang = 'column("lang")' in body or "texts_in_languages" in body or ('"lang"' in body and name != "langid")
        if uses_lang:
            assert "lang" in cls.reads, name
        for col in ("url", "host", "record_type", "charset"):
            if f'column("{col}")' in body:
                assert col in cls.reads, (name, col)
        assert src  # the module is where the table points


def test_pipeline_run_refuses_inside_a_spawned_workers_import(jsonl, tmp_path, monkeypatch):
    """What a spawned worker sees while it imports the main script (multiprocessing's flag)."""
    import multiprocessing

    monkeypatch.setattr(multiprocessing.current_process(), "_inheriting", True, raising=False)
    with pytest.raises(RuntimeError, match='if __name__ == "__main__"'):
        datapipe.Pipeline(stages=["gopher_quality"], report=False).run([jsonl], tmp_path / "out", workers=1)
    assert not (tmp_path / "out").exists()  # refused before any work


@pytest.mark.slow  # ~30 s: the nanny waits for its dead worker
def test_pipeline_run_in_an_unguarded_script_says_what_to_do(jsonl, tmp_path):
    """A script calling Pipeline.run at top level: each spawned Dask worker imported it and started a
    second run, which failed on the output lock ("Nanny failed to start")."""
    import subprocess
    import sys

    script = tmp_path / "job.py"
    script.write_text("import datapipe\n"
                      f"datapipe.Pipeline(stages=['gopher_quality'], report=False).run([{str(jsonl)!r}], "
                      f"{str(tmp_path / 'out')!r}, workers=1, dashboard_address='127.0.0.1:0')\n")
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=240)
    assert p.returncode != 0
    assert 'call it under `if __name__ == "__main__":`' in p.stderr, p.stderr[-2000:]
