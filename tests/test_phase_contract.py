"""The phase contract holds in the code: the engine knows no phase by name or by folder.

Planner, verifier, progress, CLI and API derive everything from the registry
(``datapipe.phase``), so a phase's name, the folders and files it declares (datasets, scratch
work) appear as string literals only in its own module (manifests, docs and tests aside).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from datapipe.engine.safe_paths import ENGINE_OWNED
from datapipe.phase import DOCUMENTS, PHASE1_KEPT, ROLES, Dataset, Phase, phases, run_order

REPO = Path(__file__).resolve().parent.parent
#: The engine: everything under datapipe/ but the API wrapper of one phase (``datapipe.dedup``
#: runs the dedup phase on a list of texts) and the ablation tool, which reads token shards.
ENGINE = [p for p in sorted((REPO / "datapipe").rglob("*.py"))
          if p.relative_to(REPO).as_posix() not in ("datapipe/api/dedup.py", "datapipe/__init__.py")
          and not p.relative_to(REPO).as_posix().startswith("datapipe/ablate/")]


def literals(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            out.add(n.value)
    return out


#: Words that are also a phase's name or folder but mean something else where they appear.
OTHER_MEANINGS = set(ROLES) | {"dolma"}   # roles of the contract; the Dolma JSONL input preset


def owned_names(cls: type[Phase]) -> set[str]:
    """The phase's name and the folders and files it declares. A token-shard folder is left out:
    its place is a setting whose default belongs to the token-shard format, read by the loader."""
    names = {cls.name}
    for d in cls.writes:
        if d.role == "tokens":
            continue
        top = (d.folder or d.pattern).split("/")[0]
        if top not in ENGINE_OWNED:
            names.add(top)
        if d.folder in ENGINE_OWNED and d.per_task and d != DOCUMENTS:   # e.g. rejected/dedup-{task}
            names.add(d.pattern.split("{task}")[0])
    names.update(w.split("/")[0] for w in cls.work)
    return {n for n in names if n and n not in OTHER_MEANINGS}


@pytest.mark.parametrize("cls", phases(), ids=lambda c: c.name)
def test_no_phase_name_or_folder_in_engine_modules(cls):
    own = Path(__import__(cls.__module__, fromlist=["x"]).__file__).resolve()
    names = owned_names(cls)
    hits = [(p.relative_to(REPO).as_posix(), s) for p in ENGINE if p.resolve() != own
            for s in literals(p) if s in names or any(s.startswith(n + "/") for n in names)]
    assert hits == []


def test_order_follows_declared_datasets():
    def make(name, reads, writes, rank=100):
        return type(name, (Phase,), {"name": name, "reads": reads, "writes": writes, "rank": rank})

    out = Dataset("x", "x", "*", "export")
    t2, t1 = make("late", ("documents",), (DOCUMENTS,), 20), make("early", ("documents",), (DOCUMENTS,), 10)
    reader = make("a_reader", ("x",), (Dataset("r", "", "r.html", "report"),))
    writer = make("z_writer", ("documents",), (out,))
    everything = make("b_all", ("*",), (Dataset("all", "", "all.html", "report"),))
    order = [c.name for c in run_order([everything, reader, t2, writer, t1])]
    # transforms by rank first; the reader of x after x's writer although its name sorts first; * last
    assert order == ["early", "late", "z_writer", "a_reader", "b_all"]
    loop = make("loop", ("y",), (Dataset("y2", "y2", "*", "export"),))
    back = make("back", ("y2",), (Dataset("y", "y", "*", "export"),))
    with pytest.raises(ValueError, match="cycle"):
        run_order([loop, back])


def test_documents_chain_folders():
    from datapipe.phase import documents_chain

    class A(Phase):
        name, writes = "a", (DOCUMENTS,)

    class B(Phase):
        name, writes = "b", (DOCUMENTS,)

    assert documents_chain([A(None), B(None)]) == {"a": (PHASE1_KEPT, "_documents/a"), "b": ("_documents/a", "documents")}
    assert documents_chain([B(None)]) == {"b": (PHASE1_KEPT, "documents")}
