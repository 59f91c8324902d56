"""Shared fixtures: the real data in ../shared (or $DATAPIPE_SHARED_DATA / $DATAPIPE_SHARED_CASES)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

# Evaluation sets and shard builders live with the benchmarks (not installed with the package).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from datapipe.env import models_dir, shared_cases, shared_data


@pytest.fixture(scope="session")
def data_dir():
    d = shared_data()
    assert d.is_dir(), f"shared data not found at {d}; set DATAPIPE_SHARED_DATA"
    return d


@pytest.fixture(scope="session")
def cases_dir():
    d = shared_cases()
    assert d.is_dir(), f"shared cases not found at {d}; set DATAPIPE_SHARED_CASES"
    return d


@pytest.fixture(scope="session")
def lid_model():
    p = models_dir() / "lid.176.ftz"
    assert p.is_file(), "run `make models` first"
    return p
