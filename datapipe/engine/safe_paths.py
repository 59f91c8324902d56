"""Names a manifest or an input puts into output paths must stay inside the output directory.

Manifests are data: a folder name taken from one (``tokenize.output``) is a relative path of
plain segments, never absolute, never ``.``/``..``, and never one of the run's own folders (phase 3
deletes its output folder before rewriting it: ``output: ..`` or ``documents`` would delete data).
Input names become task ids through ``datapipe.engine.task_plan.task_id_for`` (no ``/``, never hidden).
"""
from __future__ import annotations

import re

#: Top-level entries of a run directory that the engine itself owns (phases declare theirs).
ENGINE_OWNED = frozenset({"documents", "rejected", "errors", "_tasks", "_filtered", "_phases", "_documents",
                          "ledger.json", "README.md"})


def reserved() -> frozenset[str]:
    """Top-level entries the run owns: the engine's and every registered phase's work folders and
    fixed-place datasets (a token folder is a setting, so not among them)."""
    # Lazy: the phase registry imports the phases, whose configs import this module.
    from datapipe.phase import phases

    out = set(ENGINE_OWNED)
    for cls in phases():
        out.update(w.split("/")[0] for w in cls.work)
        out.update((d.folder or d.pattern).split("/")[0] for d in cls.writes if d.role != "tokens")
    return frozenset(out)
_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def check_output_subdir(value: str) -> str:
    """``value`` if it is a safe folder under the run directory, else ValueError saying why."""
    segments = value.split("/")
    if not value or value.startswith("/") or "\\" in value or ":" in value \
            or not all(_SEGMENT.fullmatch(s) for s in segments):
        raise ValueError(f"{value!r} must be a relative folder of the run directory: segments of letters, "
                         "digits, '.', '_', '-' (not starting with '.'), separated by '/'")
    own = reserved()
    if segments[0] in own:
        raise ValueError(f"{value!r} is one of the run's own folders ({', '.join(sorted(own))})")
    return value
