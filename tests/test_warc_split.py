"""A gzip WARC split into byte-range tasks at member boundaries reads every record exactly once,
with the offsets, ids and rows a whole-file read gives (issue 16: "record ids and shard contents
must not depend on the split")."""
import gzip
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datapipe.engine.task import KINDS, run_file_task
from datapipe.engine.task_plan import plan_specs
from datapipe.env import shared_data
from datapipe.io.readers import read_input
from datapipe.io.warc_parts import sync, warc_byte_ranges

SRC = shared_data() / "warc" / "realpages-1171.warc.gz"


def _members(path: Path, n: int) -> list[bytes]:
    """The first ``n`` gzip members (records) of ``path``, as compressed bytes."""
    data, out, pos = path.read_bytes(), [], 0
    while len(out) < n and pos < len(data):
        d = zlib.decompressobj(31)
        d.decompress(data[pos:pos + (8 << 20)])
        end = len(data[pos:pos + (8 << 20)]) - len(d.unused_data)
        out.append(data[pos:pos + end])
        pos += end
    return out


@pytest.fixture(scope="module")
def warc(tmp_path_factory):
    if not SRC.exists():
        pytest.skip("shared realpages sample missing")
    p = tmp_path_factory.mktemp("split") / "sample.warc.gz"
    p.write_bytes(b"".join(_members(SRC, 40)))
    return p


def _rows(path, part=None):
    return [(it.status, it.reason, it.row) for it in read_input(str(path), part=part)]


def test_parts_tile_the_file_and_read_like_the_whole(warc):
    size = warc.stat().st_size
    whole = _rows(warc)
    assert len(whole) == 40
    for split in (size // 7, size // 3, 4096):
        parts = warc_byte_ranges(str(warc), size, split)
        assert parts and len(parts) > 2
        got = [r for a, b in parts for r in _rows(warc, (a, b))]
        assert got == whole, f"split {split}"
    with open(warc, "rb") as fh:  # boundaries are member starts: the second record's offset, found from 1
        assert sync(fh, 1, size) == whole[1][2]["warc_offset"]
        assert sync(fh, 0, size) == 0 and sync(fh, size - 1, size) == size


def test_damage_detail_names_file_bytes_in_any_part(tmp_path, warc):
    """A damaged member read by a later part said ``bytes 421-4724`` (its window's coordinates),
    not the file's ``bytes 148743-153046``: errors/ depended on the split and pointed elsewhere."""
    members = _members(warc, 12)
    bad = bytearray(members[9])
    bad[len(bad) // 2:len(bad) // 2 + 40] = b"\x00" * 40  # a member that does not inflate
    start = sum(len(m) for m in members[:9])
    p = tmp_path / "damaged.warc.gz"
    p.write_bytes(b"".join(members[:9]) + bytes(bad) + b"".join(members[10:]))
    want = f"bytes {start}-{start + len(bad)}:"  # computed from the members themselves
    whole = _rows(p)
    errs = [r for st, _, r in whole if st == "errored"]
    assert [r["warc_offset"] for r in errs] == [start]
    for split in (len(members[0]) + 1, p.stat().st_size // 3):
        parts = warc_byte_ranges(str(p), p.stat().st_size, split)
        assert parts and len(parts) > 1
        got = [r for a, b in parts for r in _rows(p, (a, b))]
        assert got == whole, f"split {split}"
        details = [it.detail for a, b in parts for it in read_input(str(p), part=(a, b)) if it.status == "errored"]
        assert len(details) == 1 and details[0].startswith(want), (split, details)


def test_one_member_file_is_read_by_its_first_part(tmp_path, warc):
    raw = gzip.decompress(warc.read_bytes())
    p = tmp_path / "one.warc.gz"
    p.write_bytes(gzip.compress(raw, mtime=0))  # the whole file one gzip member: no cut point inside
    parts = warc_byte_ranges(str(p), p.stat().st_size, 8192)
    per_part = [_rows(p, part) for part in parts]
    assert [len(x) for x in per_part[1:]] == [0] * (len(parts) - 1)
    assert [r[2]["id"] for r in per_part[0]] == [r[2]["id"] for r in _rows(p)]


def test_shards_do_not_depend_on_the_split(tmp_path, warc):
    chain = [{"extract": {"sandbox": False}}, {"gopher_quality": {}}]
    tables = {}
    for split in (0, warc.stat().st_size // 5):
        out = tmp_path / f"out-{split}"
        specs = plan_specs([str(warc)], str(out), chain, "fp", split_bytes=split)
        assert len(specs) == (1 if split == 0 else 5)
        assert len({s.task_id for s in specs}) == len(specs)
        for s in specs:
            run_file_task(s)
        tables[split] = {k: pa.concat_tables([pq.read_table(f) for f in sorted((out / d).glob("*.parquet"))])
                         .sort_by([("warc_offset", "ascending"), ("id", "ascending")])
                         for k, d in KINDS.items() if list((out / d).glob("*.parquet"))}
    a, b = tables.values()
    assert a.keys() == b.keys() and a["kept"].num_rows > 0 and a["rejected"].num_rows > 0
    for k in a:
        assert a[k].equals(b[k]), k


def test_part_reader_version_is_in_the_parts_lineage(warc, monkeypatch):
    """A change in what the byte-range reader yields (``warc_parts.VERSION``) changes the split
    parts' fingerprints, so parts stored by older code are read again; a whole file's stays."""
    from datapipe.io import warc_parts

    def fps(split):
        specs = plan_specs([str(warc)], "/tmp/out", [{"extract": {}}], "x", split_bytes=split,
                           identities={str(warc): {"path": str(warc), "size": 1}})
        return [s.fingerprint for s in specs]

    parts, whole = fps(warc.stat().st_size // 3), fps(0)
    assert len(parts) > 1 and len(whole) == 1
    monkeypatch.setattr(warc_parts, "VERSION", warc_parts.VERSION + 1)
    new_parts, new_whole = fps(warc.stat().st_size // 3), fps(0)
    assert not set(new_parts) & set(parts)
    assert new_whole == whole
