"""Where shared data and models live (overridable by environment variables)."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def shared_data() -> Path:
    """``$DATAPIPE_SHARED_DATA`` or ``../shared/data`` beside the repository."""
    return Path(os.environ.get("DATAPIPE_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


def shared_cases() -> Path:
    """``$DATAPIPE_SHARED_CASES`` or ``../shared/cases`` beside the repository."""
    return Path(os.environ.get("DATAPIPE_SHARED_CASES", REPO_ROOT.parent / "shared" / "cases"))


def models_dir() -> Path:
    """``$DATAPIPE_MODELS`` or ``models/`` in the repository (filled by ``make models``)."""
    return Path(os.environ.get("DATAPIPE_MODELS", REPO_ROOT / "models"))


def cache_dir() -> Path:
    """``$DATAPIPE_CACHE`` or ``~/.cache/datapipe`` (derived, rebuildable files only)."""
    return Path(os.environ.get("DATAPIPE_CACHE", Path.home() / ".cache" / "datapipe"))
