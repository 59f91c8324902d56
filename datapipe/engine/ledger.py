"""The ledger: where every input record went.

Per task and per stage we count records in, kept, rejected by reason, errored by reason, and
bytes. Conservation ``in == kept + rejected + errored`` must hold at every stage, and each stage's
``in`` must equal the previous stage's ``kept``; ``Ledger.check`` raises ``LedgerError`` otherwise.
Non-document WARC records (requests, metadata, 404s...) are rejected at the ``read`` stage with a
``non_document:*`` reason, so every record of the input is in exactly one place.

A phase-1 task that fails on every attempt (its worker killed, e.g. over its memory limit, or an
exception outside the per-batch guards) cannot say what its records were: the whole input file
(or file part) then counts as ONE record of type ``file`` (``records_by_type["file"] += 1``),
read ``in`` 1 and errored 1 at the ``read`` stage with reason ``task:killed_worker`` or
``task:exception:<Type>``, and one ``errors/`` row names the file (datapipe.engine.task_failure).
Conservation holds; a rerun retries the file and replaces that count with its real records.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field


class LedgerError(RuntimeError):
    """The counts do not add up: a record was lost or counted twice."""


class InvariantError(LedgerError):
    """The run's files disagree with its ledger or with each other (``datapipe run`` exits 3)."""


@dataclass
class StageCounts:
    n_in: int = 0
    kept: int = 0
    rejected: Counter = field(default_factory=Counter)
    errored: Counter = field(default_factory=Counter)
    bytes_in: int = 0
    bytes_out: int = 0
    seconds: float = 0.0

    def add(self, other: "StageCounts") -> None:
        self.n_in += other.n_in
        self.kept += other.kept
        self.rejected.update(other.rejected)
        self.errored.update(other.errored)
        self.bytes_in += other.bytes_in
        self.bytes_out += other.bytes_out
        self.seconds += other.seconds

    @property
    def n_rejected(self) -> int:
        return sum(self.rejected.values())

    @property
    def n_errored(self) -> int:
        return sum(self.errored.values())

    def to_dict(self) -> dict:
        return {
            "in": self.n_in, "kept": self.kept,
            "rejected": dict(sorted(self.rejected.items())), "errored": dict(sorted(self.errored.items())),
            "bytes_in": self.bytes_in, "bytes_out": self.bytes_out, "seconds": round(self.seconds, 6),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "StageCounts":
        return cls(d["in"], d["kept"], Counter(d["rejected"]), Counter(d["errored"]),
                   d.get("bytes_in", 0), d.get("bytes_out", 0), d.get("seconds", 0.0))


class Ledger:
    """Ordered per-stage counts. ``records_by_type`` counts WARC records read, by WARC-Type."""

    def __init__(self):
        self.stages: dict[str, StageCounts] = {}
        self.records_by_type: Counter = Counter()

    def stage(self, name: str) -> StageCounts:
        return self.stages.setdefault(name, StageCounts())

    def record(self, name: str, n_in: int, kept: int, rejected=(), errored=(),
               bytes_in: int = 0, bytes_out: int = 0, seconds: float = 0.0) -> None:
        """Add counts for one batch. ``rejected``/``errored`` are iterables of reason strings."""
        s = self.stage(name)
        s.add(StageCounts(n_in, kept, Counter(rejected), Counter(errored), bytes_in, bytes_out, seconds))

    def merge(self, other: "Ledger") -> "Ledger":
        for name, counts in other.stages.items():
            self.stage(name).add(counts)
        self.records_by_type.update(other.records_by_type)
        return self

    def check(self) -> None:
        """Raise LedgerError unless every stage conserves and the stages chain."""
        prev = None
        for name, s in self.stages.items():
            if s.n_in != s.kept + s.n_rejected + s.n_errored:
                raise LedgerError(
                    f"stage {name!r}: in={s.n_in} != kept={s.kept} + rejected={s.n_rejected} + errored={s.n_errored}")
            if prev is not None and s.n_in != prev[1].kept:
                raise LedgerError(f"stage {name!r}: in={s.n_in} but stage {prev[0]!r} kept {prev[1].kept}")
            prev = (name, s)
        if self.records_by_type and "read" in self.stages:
            total = sum(self.records_by_type.values())
            if total != self.stages["read"].n_in:
                raise LedgerError(f"records by type sum to {total}, read saw {self.stages['read'].n_in}")

    @property
    def records_in(self) -> int:
        return next(iter(self.stages.values())).n_in if self.stages else 0

    @property
    def kept(self) -> int:
        return list(self.stages.values())[-1].kept if self.stages else 0

    def totals(self) -> dict:
        """Whole-run totals: records in, kept, rejected and errored summed over stages."""
        return {
            "in": self.records_in, "kept": self.kept,
            "rejected": sum(s.n_rejected for s in self.stages.values()),
            "errored": sum(s.n_errored for s in self.stages.values()),
        }

    def to_dict(self) -> dict:
        return {"records_by_type": dict(sorted(self.records_by_type.items())),
                "stages": {k: v.to_dict() for k, v in self.stages.items()},
                "totals": self.totals()}

    @classmethod
    def from_dict(cls, d: dict) -> "Ledger":
        led = cls()
        led.records_by_type = Counter(d.get("records_by_type", {}))
        for k, v in d["stages"].items():
            led.stages[k] = StageCounts.from_dict(v)
        return led

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)
