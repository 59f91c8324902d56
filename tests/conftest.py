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


@pytest.fixture(scope="session")
def warm_client():
    """One LocalCluster of 2 worker processes, made as ``datapipe run`` makes its own
    (``runner.local_cluster``), kept for the session: runs that test what a run writes, not how
    its cluster starts, pass it as ``runner.run(..., client=warm_client)`` and skip each new
    cluster's model and sandbox set-up (~13 s on 2 cores). Tests that kill, limit or count
    workers make their own."""
    from distributed import Client

    from datapipe.engine import runner
    from datapipe.manifest.load import Cluster

    with runner.local_cluster(2, memory_limit=Cluster().worker_memory_limit(2), dashboard_address="127.0.0.1:0") \
            as cluster, Client(cluster) as client:
        yield client


@pytest.fixture(scope="session")
def small_stages_run(data_dir, tmp_path_factory, warm_client):
    """The main manifest with ``scale_helpers.SMALL_RUN_STAGES`` over the WARC sample without
    realpages, run once (test_inspect.py and test_report.py read it): ``(RunResult, output dir)``.
    Tests only read it; one that changes it works on a copy."""
    from scale_helpers import SMALL_RUN_STAGES, manifest_for

    from datapipe.engine import runner

    out = tmp_path_factory.mktemp("small-stages-run")
    inputs = sorted(p for p in (data_dir / "warc").glob("*.gz") if not p.name.startswith("realpages"))
    m = manifest_for(inputs, out, stages=SMALL_RUN_STAGES, mix=None, tokenize=None)
    return runner.run(m, client=warm_client), out


@pytest.fixture(scope="session")
def trafilatura_pages(data_dir):
    """trafilatura's evaluation set (990 pages): ``(html bytes, "with" strings, "without" strings)``."""
    from datapipe import evalsets

    return evalsets.trafilatura_eval_pages(data_dir / "extraction" / "trafilatura_eval.tar.xz")


@pytest.fixture(scope="session")
def trafilatura_default_texts(trafilatura_pages):
    """The extract stage's text of each of those pages with its defaults (``extract_one(html, None)``),
    computed once for test_extract.py's string floor and test_extraction_quality.py's F1 floor."""
    from datapipe.stages.lib.extract_page import extract_one

    return [extract_one(html, None)[0] or "" for html, _, _ in trafilatura_pages]
