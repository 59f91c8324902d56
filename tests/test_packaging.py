"""Building the package prints no warning: metadata (an SPDX ``license`` string, not the TOML table
setuptools deprecates) and the wheel (every folder it ships is a listed package), built from a
copy of the sources with warnings turned into errors."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

_BUILD = """
import sys, warnings
warnings.simplefilter("error")
from setuptools import build_meta
print(build_meta.build_wheel(sys.argv[1]))
"""


def test_wheel_builds_without_warnings(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for name in ("datapipe", "stages", "classifiers"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path / "dist"
    dist.mkdir()
    r = subprocess.run([sys.executable, "-c", _BUILD, str(dist)], cwd=src, capture_output=True, text=True, check=False,
                       timeout=300)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    wheel = dist / r.stdout.split()[-1]
    names = zipfile.ZipFile(wheel).namelist()
    shipped = sorted(p.name for p in (REPO / "classifiers" / "models").iterdir() if p.is_file())
    assert sorted(n.rsplit("/", 1)[-1] for n in names if n.startswith("datapipe/classifiers/models/")) == shipped
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in meta
