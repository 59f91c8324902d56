"""The package is laid out by concept: a small top level, subpackages, a checkout that imports."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_top_level_of_datapipe_is_small():
    modules = sorted(p.name for p in (REPO / "datapipe").glob("*.py"))
    packages = sorted(p.name for p in (REPO / "datapipe").iterdir() if (p / "__init__.py").is_file())
    assert len(modules) <= 12, modules
    assert {"cli", "engine", "manifest", "io", "formats", "loader", "inspect", "api", "ablate"} <= set(packages)


def test_a_plain_checkout_imports_without_the_editable_install():
    # The editable install's finder removed: only the checkout on sys.path (cwd) can provide the packages.
    code = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]; "
            "import datapipe.stages.gopher, datapipe.classifiers.model, datapipe.stages.phases.dedup.phase; "
            "print(datapipe.stages.__file__)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()) == REPO / "stages" / "__init__.py"


def test_a_second_checkout_imports_its_own_stages(tmp_path):
    # With datapipe installed (editable) from REPO, a copy of the checkout on PYTHONPATH must still get
    # the copy's stages: the checkout finder is asked before the install's mapping.
    copy = tmp_path / "other"
    for part in ("datapipe", "stages", "classifiers"):
        shutil.copytree(REPO / part, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", copy / "pyproject.toml")
    code = "import datapipe.stages.gopher as g, datapipe.classifiers as c; print(g.__file__); print(c.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(copy)})
    assert out.returncode == 0, out.stderr
    assert [Path(x) for x in out.stdout.split()] == [copy / "stages" / "gopher.py", copy / "classifiers" / "__init__.py"]


@pytest.mark.parametrize("name, stem", [("IA-001.arc.gz", "IA-001"), ("crawl.wat.gz", "crawl"),
                                        ("dump.ndjson.zst", "dump"), ("CC-001.warc.gz", "CC-001")])
def test_task_ids_drop_every_input_suffix(name, stem):
    from datapipe.engine.task_plan import task_id_for

    tid = task_id_for(f"/d/{name}")
    assert tid.rsplit("-", 1)[0] == stem and len(tid.rsplit("-", 1)[1]) == 8
