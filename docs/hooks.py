"""MkDocs hook: generate the reference pages and the benchmark results page before every build
(``mkdocs build`` and ``mkdocs serve`` alike), and list them in the nav, so they cannot drift."""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import gen_benchmarks
import gen_reference


def on_config(config, **kwargs):
    out = Path(config["docs_dir"]) / "reference"
    gen_reference.write(out)
    gen_benchmarks.write(out / "benchmark-results.md")
    (out / "changelog.md").write_text((HERE.parent / "CHANGELOG.md").read_text(encoding="utf-8"), encoding="utf-8")
    for item in config["nav"]:
        if isinstance(item, dict) and "Reference" in item:
            item["Reference"] = gen_reference.nav(out)
        if isinstance(item, dict) and "Benchmarks" in item:
            item["Benchmarks"].append({"Result files": "reference/benchmark-results.md"})
    return config
