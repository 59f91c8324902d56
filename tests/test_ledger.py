"""Ledger arithmetic: conservation, chaining, merge, JSON round trip."""
import pytest

from datapipe.engine.ledger import Ledger, LedgerError
from datapipe.io.parquet import read_json, write_json_atomic


def small():
    led = Ledger()
    led.record("read", 10, 7, ["non_document:request"] * 2, ["read:truncated_record"])
    led.record("extract", 7, 6, ["extract:empty"])
    led.record("langid", 6, 4, ["langid:low_score", "langid:language"])
    return led


def test_conserving_ledger_passes_and_totals():
    led = small()
    led.check()
    assert led.totals() == {"in": 10, "kept": 4, "rejected": 5, "errored": 1}


def test_lost_record_is_detected():
    led = small()
    led.record("extract", 1, 0)  # one record in, nowhere out
    with pytest.raises(LedgerError, match="extract"):
        led.check()


def test_broken_chain_is_detected():
    led = Ledger()
    led.record("read", 5, 5)
    led.record("extract", 4, 4)
    with pytest.raises(LedgerError, match="read' kept 5"):
        led.check()


def test_json_round_trip_keeps_stage_order(tmp_path):
    # Regression: JSON written with sorted keys put 'extract' before 'read' and broke the chain check.
    url = str(tmp_path / "l.json")
    write_json_atomic(url, small().to_dict())
    back = Ledger.from_dict(read_json(url))
    assert list(back.stages) == ["read", "extract", "langid"]
    back.check()


def test_merge_adds_counts():
    a, b = small(), small()
    a.merge(b)
    a.check()
    assert a.stages["langid"].rejected == {"langid:low_score": 2, "langid:language": 2}
    assert a.totals()["in"] == 20
