"""User-facing text names no internal history: no work-session names ("session 7"), no issue
references ("issue 16", "#16"), no commit hashes. Checked in README.md, CHANGELOG.md, docs/**/*.md,
examples/, the docstrings of datapipe/, stages/ and classifiers/, and every tracked file name.
Each finding is reported as ``path:line: text``."""
from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SESSION = re.compile(r"\bsessions?\s+\d+|\bsession\s+[ivx]+\b|\bs[5-9][abc]?\b(?=[-_.])", re.IGNORECASE)
ISSUE = re.compile(r"\bissues?\s*#?\d+|\bissue\d+|(?<![\w&/])#\d{1,4}\b(?![\w-])|\bpull request\s*#?\d+", re.IGNORECASE)
# A commit hash: 7-40 hex digits with at least one letter and one digit, not part of a longer word.
HEX = re.compile(r"(?<![\w/.-])[0-9a-f]{7,40}(?![\w/-])")


def looks_like_hash(tok: str) -> bool:
    return bool(re.search(r"[a-f]", tok)) and bool(re.search(r"\d", tok)) and not tok.isdigit()


def findings(text: str, hashes: bool = True) -> list[str]:
    """The offending snippets of ``text``: session names, issue references, commit hashes."""
    out = [m.group(0) for m in SESSION.finditer(text)] + [m.group(0) for m in ISSUE.finditer(text)]
    if hashes:
        out += [m.group(0) for m in HEX.finditer(text) if looks_like_hash(m.group(0))]
    return out


def tracked() -> list[Path]:
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    return [ROOT / n for n in names if (ROOT / n).exists()]


def docstrings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of the module, class and function docstrings of a Python file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append((node.body[0].lineno, doc))
    return out


def text_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "CHANGELOG.md"]
    files += sorted(p for p in (ROOT / "docs").rglob("*.md") if "reference" not in p.relative_to(ROOT / "docs").parts)
    files += sorted(p for p in (ROOT / "examples").rglob("*") if p.is_file() and p.suffix in (".py", ".md", ".toml"))
    return [p for p in files if p.exists()]


def test_the_patterns_catch_what_they_should():
    for bad in ("as in session 7", "Session 12's figures", "issue 16", "(issue #29)", "see #16", "commit 5be2718",
                "at a377d77", "device-h200-s6-ratio.json"):
        assert findings(bad), bad
    for fine in ("sha256 8f3472cfe8738a7b6099e8e999c3cbfae0dcd15696aac7d7738a8039db603e83"[:6], "warm_client for the session",
                 "a 2026-12-01 run", "0x184D2A5D", "colour #fff", "ids 00000000, 00000001", "python3.12", "r50k_base",
                 "x 1e-5", "the `#` heading", "sha1(...)", "Dask's P2P shuffle"):
        assert not findings(fine), (fine, findings(fine))


@pytest.mark.parametrize("path", text_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_user_text_has_no_internal_references(path):
    bad = [f"{path.relative_to(ROOT)}:{i}: {hit!r} in {line.strip()[:120]!r}"
           for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) for hit in findings(line)]
    assert not bad, "\n".join(bad)


def test_docstrings_have_no_internal_references():
    bad = []
    for top in ("datapipe", "stages", "classifiers"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for line, doc in docstrings(path):
                for hit in findings(doc, hashes=False):  # docstrings quote hashes of data (sha256 prefixes)
                    bad.append(f"{path.relative_to(ROOT)}:{line}: {hit!r}")
    assert not bad, "\n".join(bad)


def test_file_names_have_no_internal_references():
    bad = [str(p.relative_to(ROOT)) for p in tracked()
           if findings(p.relative_to(ROOT).as_posix().replace("/", " "), hashes=False)]
    assert not bad, "\n".join(bad)
