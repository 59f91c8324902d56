"""Every ```python and ```bash block of README.md and docs/**/*.md runs (the generated reference
pages excepted). A block preceded by an ``<!-- no-test ... -->`` line (it needs a cluster or the
network) is skipped. Blocks of one page run in order, in one scratch folder laid out as the
checkout: ``manifests/``, ``examples/``, ``.venv`` and ``models`` linked in, ``../shared`` next
to it, and ``runs/sample`` a small finished run (tests/doc_run.py). Python blocks of a page run
together as one script, so later blocks see earlier names."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from doc_run import ROOT, shared_data, small_run

FENCE = re.compile(r"^```(\w*)\s*$")
NO_TEST = re.compile(r"^<!--\s*no-test\b")


def blocks(path: Path) -> list[tuple[int, str, str]]:
    """``(line, language, code)`` of the python/bash blocks of a Markdown file, opt-outs removed."""
    out, lines, i = [], path.read_text(encoding="utf-8").splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m and m.group(1):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            prev = next((x for x in reversed(lines[:i]) if x.strip()), "")
            if m.group(1) in ("python", "bash") and not NO_TEST.match(prev.strip()):
                out.append((i + 1, m.group(1), "\n".join(lines[i + 1:j])))
            i = j
        i += 1
    return out


def pages() -> list[Path]:
    docs = sorted(p for p in (ROOT / "docs").rglob("*.md") if "reference" not in p.relative_to(ROOT / "docs").parts)
    return [p for p in [ROOT / "README.md", *docs] if blocks(p)]


def test_blocks_finds_fences_and_opt_outs(tmp_path):
    md = tmp_path / "x.md"
    md.write_text("a\n```python\nx = 1\n```\n<!-- no-test: cluster -->\n```bash\nexit 1\n```\n```text\nno\n```\n"
                  "```bash\necho hi\n```\n")
    assert blocks(md) == [(2, "python", "x = 1"), (12, "bash", "echo hi")]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, warm_client):
    base = tmp_path_factory.mktemp("docs")
    (base / "shared").symlink_to(shared_data().resolve().parent)
    repo = base / "repo"
    repo.mkdir()
    for name in ("manifests", "examples", "benchmarks", ".venv", "models"):
        if (ROOT / name).exists():
            (repo / name).symlink_to(ROOT / name)
    (repo / "runs").mkdir()
    (repo / "runs" / "sample").symlink_to(small_run(warm_client))
    return repo


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_page_blocks_run(page, workdir):
    env = {**os.environ, "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
           "DATAPIPE_SHARED_DATA": str(shared_data().resolve()), "COLUMNS": "100"}
    py = []
    for line, lang, code in blocks(page):
        if lang == "bash":
            p = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=workdir, env=env,
                               capture_output=True, text=True, timeout=600, check=False)
            assert p.returncode == 0, f"{page.name}:{line}: bash block failed\n{code}\n{p.stdout[-1500:]}\n{p.stderr[-3000:]}"
        else:
            py.append(f"# {page.name}:{line}\n{code}")
    if py:
        p = subprocess.run([sys.executable, "-c", "\n\n".join(py)], cwd=workdir, env=env,
                           capture_output=True, text=True, timeout=600, check=False)
        assert p.returncode == 0, f"{page.name}: python blocks failed\n{p.stdout[-1500:]}\n{p.stderr[-3000:]}"
