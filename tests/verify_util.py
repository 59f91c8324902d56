"""A one-task run folder that passes ``datapipe.engine.verify.verify_run``, for the tests that break it."""
from __future__ import annotations

import pyarrow.parquet as pq
from dedup_fixtures import documents_table

from datapipe.engine.ledger import Ledger


def one_task_run(root):
    """``root/_filtered/t1.parquet`` and ``root/documents/t1.parquet`` (2 rows: ids a, b) and the
    ledger that read them: returns ``(table, ledger, task_records)`` for ``verify_run``."""
    t = documents_table([{"id": "a", "text": "one two"}, {"id": "b", "text": "three four"}])
    for d in ("_filtered", "documents"):
        (root / d).mkdir()
        pq.write_table(t, root / d / "t1.parquet")
    led = Ledger()
    led.record("read", 2, 2)
    led.records_by_type["response"] = 2
    return t, led, [{"task_id": "t1", "input": "x.warc.gz", "ledger": led.to_dict()}]
