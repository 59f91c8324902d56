"""Per-worker memory (issue 14): ``cluster.memory_limit: auto`` is a share of the machine per
worker, and a worker killed for memory is reported with the file and how far its task had got."""
from __future__ import annotations

import pytest
from distributed import KilledWorker
from distributed.system import MEMORY_LIMIT
from pydantic import ValidationError

from datapipe.engine.task_failure import failure_detail
from datapipe.engine.task_plan import TaskSpec
from datapipe.manifest.load import AUTO_MEMORY_SHARE, Cluster


@pytest.mark.parametrize("workers", [1, 2, 7, 64])
def test_auto_is_a_share_of_the_machine_per_worker(workers):
    limit = Cluster().worker_memory_limit(workers)
    assert limit == int(MEMORY_LIMIT * AUTO_MEMORY_SHARE / workers)
    assert limit * workers <= 0.9 * MEMORY_LIMIT + workers  # together they leave 10% to the rest


def test_other_memory_limits_pass_through_or_are_refused():
    assert Cluster(memory_limit="4GiB").worker_memory_limit(3) == "4GiB"
    assert Cluster(memory_limit="0.25").worker_memory_limit(3) == "0.25"
    assert Cluster(memory_limit="None").worker_memory_limit(3) is None
    assert Cluster(memory_limit="0").worker_memory_limit(3) is None  # Dask's spelling of no limit
    for bad in ("lots", "2", "-0.5", "1.5"):  # "2" would be 2 bytes for Dask
        with pytest.raises(ValidationError, match="memory_limit"):
            Cluster(memory_limit=bad)


def test_killed_worker_message_names_the_file_and_the_progress():
    spec = TaskSpec("big-1", "/data/big.warc.gz", "/out", [], "fp")
    exc = KilledWorker("read-extract-filter-big-1", "tcp://127.0.0.1:4000", 1)
    msg = failure_detail(exc, spec, {"records": 512, "offset": 1234567})
    assert msg.startswith("the worker running it died on each of 2 attempts (last tcp://127.0.0.1:4000)")
    assert "while processing /data/big.warc.gz, after 512 record(s), the last at byte offset 1234567" in msg
    assert "within its first batch" in failure_detail(exc, spec, {})
    assert "/data/big.warc.gz" in failure_detail(exc, spec, None)
