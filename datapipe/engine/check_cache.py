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
from datapipe.io.paths import is_remote

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


# ------------------------------------------------------------------ content hashes of asset files

HASH_FILE = "file-hashes.json"
#: Hashes kept (oldest first out); one entry is ~150 bytes.
MAX_HASHES = 4096
_HASHES: dict[str, str] = {}   # this process's copy: a fingerprint is asked for often


def _stat_key(path: str) -> str:
    """Where and which file ``path`` is right now: real path, size, mtime_ns, ctime_ns, inode. A
    file rewritten in place with its size and mtime put back still moves its ctime."""
    st = os.stat(path)
    return fingerprint(os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _load_hashes() -> dict:
    try:
        data = json.loads((cache_dir() / HASH_FILE).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_hashes(new: dict[str, str]) -> None:
    data = _load_hashes()
    data.update(new)
    while len(data) > MAX_HASHES:
        data.pop(next(iter(data)))
    path = cache_dir() / HASH_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{HASH_FILE}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    except OSError:
        pass


def sha256_file(path: str, chunk: int = 1 << 20) -> str:
    """sha256 (hex) of a local file's bytes, read in 1 MiB chunks."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def file_sha256(path: str) -> str:
    """sha256 of a local file, remembered by its identity on disk (``_stat_key``) in this process
    and in ``$DATAPIPE_CACHE/file-hashes.json``."""
    key = _stat_key(path)
    if key not in _HASHES:
        cached = _load_hashes().get(key)
        _HASHES[key] = cached or sha256_file(path)
        if cached is None:
            _save_hashes({key: _HASHES[key]})
    return _HASHES[key]


def content_digest(paths) -> str:
    """One hash of what the files ``paths`` hold: ``fingerprint`` of ``[[file name, sha256], ...]``
    in the given order (folders skipped: the files in them are listed; a missing file counts as
    ``missing``). The same bytes under the same names give the same digest on every machine: no
    folder, mtime or inode enters it. Each file's sha256 is remembered by its path, size, mtime,
    ctime and inode (``$DATAPIPE_CACHE/file-hashes.json``), so only a changed file is read again.
    A remote URL counts by its store's checksum (ETag)."""

    parts, new = [], {}
    cached = None
    for p in paths:
        p = str(p)
        name = p.rstrip("/").rsplit("/", 1)[-1]
        if is_remote(p):
            from fsspec.core import url_to_fs

            fs, lp = url_to_fs(p)
            parts.append([name, str(fs.checksum(lp))])
            continue
        if os.path.isdir(p):
            continue
        try:
            key = _stat_key(p)
        except OSError:
            parts.append([name, "missing"])
            continue
        if key not in _HASHES:
            if cached is None:
                cached = _load_hashes()
            _HASHES[key] = cached.get(key) or sha256_file(p)
            if key not in cached:
                new[key] = _HASHES[key]
        parts.append([name, _HASHES[key]])
    if new:
        _save_hashes(new)
    return fingerprint(parts, length=16)


def assets_digest(obj) -> str | None:
    """``content_digest`` of a stage's ``lineage_assets()`` or a phase's ``assets()``; None when
    it names no files (then nothing is added to its lineage); ``unresolved`` when they cannot be
    resolved (the check before work reports why)."""
    try:
        files = obj.lineage_assets() if hasattr(obj, "lineage_assets") else obj.assets()
    except Exception:  # noqa: BLE001 - any stage's own error: its check names it
        return "unresolved"
    if not files:
        return None
    return content_digest(files)
