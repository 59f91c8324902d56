"""The package's import structure, read with ``ast`` (nothing is imported).

Module names follow the install layout: ``datapipe/`` is ``datapipe``, ``stages/`` is
``datapipe.stages`` and ``classifiers/`` is ``datapipe.classifiers`` (pyproject's package-dir).
Asserts: no import cycle among module-level imports (those under ``if TYPE_CHECKING:`` do not run
and are left out), fewer than ``MAX_FUNCTION_IMPORTS`` intra-package imports inside functions, each
with a comment on its line or the line above saying why, and no ``from X import _private`` across
modules.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TREES = {"datapipe": ROOT / "datapipe", "datapipe.stages": ROOT / "stages",
         "datapipe.classifiers": ROOT / "classifiers"}

#: Intra-package imports inside functions must stay below this (the issue's bound); each one says why.
MAX_FUNCTION_IMPORTS = 15

#: No ``from X import _private`` across modules: a name used by another module is public.
MAX_PRIVATE_IMPORTS = 1


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of the three trees."""
    out = {}
    for prefix, top in TREES.items():
        for path in sorted(top.rglob("*.py")):
            parts = list(path.relative_to(top).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([prefix, *parts])] = path
    return out


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _absolute(node: ast.ImportFrom, module: str, path: Path) -> str:
    """The module an ``ImportFrom`` names, relative imports resolved against ``module``."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if _is_package(path) else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and (
        (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
        or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING"))


def imports(path: Path, module: str, known: dict[str, Path]):
    """``(target module, imported names, line, at_module_level)`` for every intra-package import.

    ``from P import x`` targets ``P.x`` when that is a module, else ``P``. Imports in class bodies
    run at import time and count as module level; those in functions do not.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = []

    def visit(node, top_level: bool):
        for child in ast.iter_child_nodes(node):
            if _type_checking(child):
                continue
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, False)
                continue
            if isinstance(child, ast.Import):
                for a in child.names:
                    if a.name.split(".")[0] == "datapipe":
                        out.append((a.name, [], child.lineno, top_level))
            elif isinstance(child, ast.ImportFrom):
                base = _absolute(child, module, path)
                if base.split(".")[0] != "datapipe":
                    continue
                for a in child.names:
                    sub = f"{base}.{a.name}"
                    out.append((sub if sub in known else base, [a.name], child.lineno, top_level))
            visit(child, top_level)

    visit(tree, True)
    return out


def module_graph() -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = {m: set() for m in known}
    for m, path in known.items():
        for target, _, _, top in imports(path, m, known):
            if top and target in known and target != m:
                graph[m].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []

    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def function_imports() -> list[tuple[str, int, str]]:
    """``(file, line, target)`` of the intra-package import statements inside functions."""
    known = modules()
    out = {}
    for m, path in known.items():
        for target, _, line, top in imports(path, m, known):
            if not top:  # one import statement counts once, however many names it takes
                out.setdefault((path.relative_to(ROOT).as_posix(), line), target)
    return [(f, n, t) for (f, n), t in out.items()]


def _commented(path: Path, line: int) -> bool:
    """A comment on the line, or above the run of import lines it belongs to."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if "#" in lines[line - 1]:
        return True
    i = line - 2
    while i >= 0 and lines[i].strip().startswith(("from ", "import ", ")", "    ")) and not lines[i].strip().startswith("#") \
            and lines[i].strip() and not lines[i].rstrip().endswith(":"):
        i -= 1
    return i >= 0 and lines[i].strip().startswith("#")


def private_imports() -> list[str]:
    """``file:line module.name`` of every ``from X import _private`` across modules."""
    known = modules()
    bad = []
    for m, path in known.items():
        for target, names, line, _ in imports(path, m, known):
            bad += [f"{path.relative_to(ROOT)}:{line} {target}.{n}" for n in names
                    if n.startswith("_") and not n.startswith("__") and target != m]
    return bad


def facts() -> dict:
    """The three checks' findings, computed in a fresh interpreter: in a long test process,
    CPython 3.11's parser can be left unusable by an earlier RecursionError ("AST constructor
    recursion depth mismatch"), which says nothing about this tree."""
    global _FACTS
    if _FACTS is None:
        out = subprocess.run([sys.executable, __file__], capture_output=True, text=True, timeout=300, check=True)
        _FACTS = json.loads(out.stdout)
    return _FACTS


_FACTS: dict | None = None


def test_module_level_imports_have_no_cycles():
    assert facts()["cycles"] == []


def test_few_function_level_imports_each_with_a_reason():
    found = facts()["function_imports"]
    assert len(found) < MAX_FUNCTION_IMPORTS, "\n".join(f"{f}:{n} {t}" for f, n, t in found)
    silent = [f"{f}:{n}" for f, n, _ in found if not _commented(ROOT / f, n)]
    assert silent == [], "function-level imports need a comment saying why: " + ", ".join(silent)


def test_no_private_names_imported_across_modules():
    bad = facts()["private_imports"]
    assert len(bad) < MAX_PRIVATE_IMPORTS, "\n".join(bad)


def test_the_graph_reader_sees_a_cycle_and_a_relative_import(tmp_path):
    """The reader itself: a two-module cycle is one component; ``from . import b`` resolves."""
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "a.py").write_text("from . import b\ndef f():\n    from datapipe.x import _y\n")
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'tests')!r}); from pathlib import Path; "
            f"import test_import_graph as g; t = Path({str(tmp_path)!r}); "
            "known = {'datapipe.p': t / '__init__.py', 'datapipe.p.a': t / 'a.py', 'datapipe.p.b': t / 'b.py'}; "
            "print(g.imports(t / 'a.py', 'datapipe.p.a', known))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == repr([("datapipe.p.b", ["b"], 1, True), ("datapipe.x", ["_y"], 3, False)])


if __name__ == "__main__":
    print(json.dumps({"cycles": cycles(module_graph()), "function_imports": function_imports(),
                      "private_imports": private_imports()}))
