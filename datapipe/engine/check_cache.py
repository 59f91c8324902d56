"""Stage checks remembered across processes, keyed by the size and mtime of each asset file.

``runner.check_before_work`` loads every stage's models once on the client so that a missing or
broken asset stops the run before any work. Loading them is most of a small run's checks
(measured: the extraction sandbox, the UT1 list and scikit-learn for ``profanity``, ~2.5 s).
A stage that names its asset files (``Stage.assets()``) is checked once per identity of those
files: the entry holds ``[path, size, mtime_ns]`` of each, and a later process whose stage
config, working directory, ``DATAPIPE_*`` variables, interpreter and stage module are the same
and whose files still have that size and mtime skips the load. A file replaced, touched or
removed checks the stage again (and a missing one fails there, with the stage's own message).
Stages without ``assets()`` (None) are checked in every process.

The entries live in ``$DATAPIPE_CACHE/checked-stages.json`` (``~/.cache/datapipe``), written
atomically; a lost or unreadable file only means checking again.
"""
from __future__ import annotations

import inspect
import json
import os
import sys
from pathlib import Path

from datapipe.engine.lineage import fingerprint
from datapipe.env import cache_dir

FILE = "checked-stages.json"
#: Kept per file; the oldest entries go first (a check costs seconds, the file a few KB).
MAX_ENTRIES = 256


def _stat(path) -> list:
    st = os.stat(path)
    return [str(Path(path).resolve()), st.st_size, st.st_mtime_ns]


def stage_key(stage) -> str:
    """Everything besides the asset files that decides what ``check()`` of a stage (or a phase,
    whose ``config()`` is its settings) finds."""
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("DATAPIPE_") and k != "DATAPIPE_CACHE")
    module = inspect.getsourcefile(type(stage)) or ""
    code = _stat(module) if module and os.path.exists(module) else [module]
    config = stage.config() if callable(stage.config) else stage.config.model_dump(mode="json")
    return fingerprint(type(stage).__name__, stage.name, config, os.getcwd(), env, sys.executable, code)


def _assets(stage) -> list | None:
    """``[[path, size, mtime_ns], ...]`` of the stage's assets; None when it names none or one is missing."""
    try:
        files = stage.assets()
        return None if files is None else sorted(_stat(f) for f in files)
    except Exception:  # noqa: BLE001 - missing or unresolvable (any stage's error): the real check reports it
        return None


def _load() -> dict:
    try:
        data = json.loads((cache_dir() / FILE).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def is_checked(stage) -> bool:
    """True when this stage config passed ``check()`` before with exactly these asset files."""
    files = _assets(stage)
    return files is not None and _load().get(stage_key(stage)) == files


def remember(stage) -> None:
    """Record a passed check (no-op for a stage without ``assets()``; an unwritable cache is fine)."""
    files = _assets(stage)
    if files is None:
        return
    data = _load()
    data.pop(stage_key(stage), None)
    data[stage_key(stage)] = files
    while len(data) > MAX_ENTRIES:
        data.pop(next(iter(data)))
    path = cache_dir() / FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{FILE}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    except OSError:
        pass
