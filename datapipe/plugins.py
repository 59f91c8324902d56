"""Stages and phases from other packages, found through Python entry points.

A user's package declares, in its ``pyproject.toml``::

    [project.entry-points."datapipe.stages"]
    shout = "mypkg.shout"           # a module that registers a Stage on import
    [project.entry-points."datapipe.phases"]
    drop_phrase = "mypkg.drop_phrase:DropPhrasePhase"   # or the class itself

and datapipe loads them beside its own (``datapipe stages`` lists them, manifests name them).
Entry points are read again whenever ``sys.path`` changes (a notebook that installs a plugin
needs no restart); a plugin that fails to import raises, so a run never silently loses a step.
"""
from __future__ import annotations

import sys
from importlib.metadata import entry_points

STAGES = "datapipe.stages"
PHASES = "datapipe.phases"

_SEEN: dict[str, tuple] = {}


def load(group: str) -> list:
    """Load every entry point of ``group`` not loaded for the current ``sys.path``; return the
    objects loaded now (modules or classes, in entry-point name order)."""
    key = tuple(sys.path)
    if _SEEN.get(group) == key:
        return []
    out = [ep.load() for ep in sorted(entry_points(group=group), key=lambda e: e.name)]
    _SEEN[group] = key
    return out
