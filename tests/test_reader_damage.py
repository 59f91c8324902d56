"""No record lost without a trace (issue 14): damaged inputs, read through ``read_input``.

Small multi-record files are written here with warcio (WARC) or json/gzip/zstandard (JSONL), then
damaged: a member or record cut at every byte offset (followed by the rest of the file, or as the
file's end), byte ranges zeroed, zero-length gzip members, garbage between members, a member that
is not a WARC record. For every variant the records an independent parser finds in the intact
parts (warcio on the prefix and suffix around the damage; zlib/zstandard plus ``json`` for
JSONL) must all be read, whole, and the damage must cost at most the damaged record, counted as
an ``errored`` item with a ``read:*`` reason, its byte offset and a detail. Each errored item
carries the provenance fields, and items come in file order (the engine sorts by ``warc_offset``).
"""
from __future__ import annotations

import gzip
import io
import json
import random
import zlib

import pytest
import zstandard
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from datapipe.io.readers import read_input

N_RESPONSES = 5
DAMAGED = 2  # index of the member / record that is damaged (the third of six)
_WORDS = None


def _words() -> list[str]:
    global _WORDS
    if _WORDS is None:
        rnd = random.Random(14)
        _WORDS = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 9)))
                  for _ in range(300)]
    return _WORDS


def build_warc(gz: bool) -> tuple[bytes, list[tuple[int, int]], list[str]]:
    """A warcinfo record and five HTML responses (ids and dates fixed). Returns the file, each
    record's byte range (its gzip member when ``gz``) and the record ids in order."""
    rnd = random.Random(7)
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=gz)
    fixed = {"WARC-Date": "2024-01-01T00:00:00Z"}
    info = w.create_warcinfo_record("damage.warc", {"software": "test_reader_damage"})
    info.rec_headers.replace_header("WARC-Record-ID", "<urn:uuid:00000000-0000-0000-0000-0000000000ff>")
    info.rec_headers.replace_header("WARC-Date", fixed["WARC-Date"])
    records = [info]
    for i in range(N_RESPONSES):
        body = (f"<html><body><p>page {i} " + " ".join(rnd.choice(_words()) for _ in range(40 + 5 * i))
                + "</p></body></html>").encode()
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                           ("Content-Length", str(len(body)))], protocol="HTTP/1.1")
        rid = f"<urn:uuid:00000000-0000-0000-0000-{i:012d}>"
        records.append(w.create_warc_record(f"http://example.com/{i}", "response", payload=io.BytesIO(body),
                                            http_headers=http, warc_headers_dict={"WARC-Record-ID": rid, **fixed}))
    bounds = []
    for r in records:
        a = buf.tell()
        w.write_record(r)
        bounds.append((a, buf.tell()))
    return buf.getvalue(), bounds, [r.rec_headers.get_header("WARC-Record-ID") for r in records]


def warcio_ids(data: bytes) -> list[str]:
    """Record ids warcio finds in ``data`` (an intact run of whole members or records)."""
    return [r.rec_headers.get_header("WARC-Record-ID") for r in ArchiveIterator(io.BytesIO(data))]


class Reader:
    """Writes each variant to one file and reads it with ``read_input`` (the engine's reader API)."""

    def __init__(self, tmp_path, name: str):
        self.path = tmp_path / name
        self.n = 0

    def __call__(self, data: bytes) -> list:
        self.path.write_bytes(data)
        self.n += 1
        return list(read_input(str(self.path)))


def assert_accounted(items, intact: list[str], damaged: set[str], label: str, *,
                     max_errored: int = 1, min_errored: int = 1, originals: dict | None = None):
    """``intact`` records all read once; each ``damaged`` one errored or, if read, unchanged;
    between ``min_errored`` and ``max_errored`` errored items, each with offset, reason and detail.
    ``damaged=None``: the damage may have changed the record's id too (zeroed header bytes): at
    most one record outside ``intact`` may be read."""
    read = [i for i in items if i.status != "errored"]
    errored = [i for i in items if i.status == "errored"]
    got = [i.row["warc_record_id"] for i in read]
    assert [x for x in got if x in intact] == intact, f"{label}: intact records not all read: {got}"
    if damaged is None:
        assert len([x for x in got if x not in intact]) <= 1 and len(got) == len(set(got)), f"{label}: {got}"
        damaged = set(got) - set(intact)
    for i in read:
        rid = i.row["warc_record_id"]
        assert rid in intact or rid in damaged, f"{label}: unexpected record {rid}"
        if rid in damaged and originals is not None:  # a damaged record read must be whole
            assert i.row.get("payload") == originals[rid], f"{label}: partial page {rid} emitted"
    assert min_errored <= len(errored) <= max_errored, \
        f"{label}: {len(errored)} errored: {[(e.reason, e.detail) for e in errored]}"
    assert len(read) + len(errored) >= len(intact) + (len(damaged) if not errored else 1)
    for e in errored:
        assert e.reason.startswith("read:") and e.detail, (label, e.reason, e.detail)
        assert isinstance(e.row["warc_offset"], int) and e.row["source"] and e.row["warc_file"], label
        assert e.row["id"] and e.row["record_type"], label
    offsets = [i.row["warc_offset"] for i in items]
    assert offsets == sorted(offsets), f"{label}: items out of file order {offsets}"


@pytest.fixture(scope="module")
def warc_gz():
    return build_warc(gz=True)


@pytest.fixture(scope="module")
def warc_plain():
    return build_warc(gz=False)


@pytest.fixture(scope="module")
def payloads(warc_plain):
    """Record id -> HTTP body of the intact file (to tell a whole record from a partial one)."""
    data, _, _ = warc_plain
    out = {}
    for r in ArchiveIterator(io.BytesIO(data)):
        if r.rec_type == "response":
            out[r.rec_headers.get_header("WARC-Record-ID")] = r.content_stream().read()
    return out


def around_damaged(fixture):
    """``(data, bounds, ids, bounds[DAMAGED], ids of the other records)`` of a WARC fixture."""
    data, bounds, ids = fixture
    return data, bounds, ids, bounds[DAMAGED], [x for k, x in enumerate(ids) if k != DAMAGED]


def zeroed_inside(data: bytes, a: int, b: int, rnd: random.Random, times: int = 60):
    """``times`` copies of ``data`` with a run of 1-64 bytes zeroed that starts in ``[a, b - 1)`` and
    ends by ``b`` (inside one record or member): ``(start, length, damaged bytes)`` each."""
    for _ in range(times):
        s = rnd.randrange(a, b - 1)
        n = rnd.randint(1, min(64, b - s))
        yield s, n, data[:s] + bytes(n) + data[s + n:]


# ------------------------------------------------------------------ gzip, one member a record

def test_gzip_member_cut_at_every_offset(warc_gz, tmp_path, payloads):
    data, bounds, ids = warc_gz
    a, b = bounds[DAMAGED]
    prefix, suffix = data[:a], data[b:]
    intact = warcio_ids(prefix) + warcio_ids(suffix)
    assert len(intact) == len(ids) - 1
    read = Reader(tmp_path, "cut.warc.gz")
    for c in range(1, b - a):
        label = f"member {DAMAGED} cut after {c} of {b - a} bytes"
        assert_accounted(read(data[:a + c] + suffix), intact, {ids[DAMAGED]}, label, originals=payloads)
        # The same cut as the end of the file: everything before it read, one errored item.
        assert_accounted(read(data[:a + c]), warcio_ids(prefix), {ids[DAMAGED]}, label + " (file end)",
                         originals=payloads)
    assert read.n == 2 * (b - a - 1) > 400


def test_gzip_zeroed_byte_ranges(warc_gz, tmp_path, payloads):
    data, bounds, ids, (a, b), intact = around_damaged(warc_gz)
    rnd = random.Random(1)
    read = Reader(tmp_path, "zeroed.warc.gz")
    for s, n, d in zeroed_inside(data, a, b, rnd):  # inside one member
        # zeroing the gzip header's MTIME/XFL/OS bytes leaves the record whole: then none errored
        assert_accounted(read(d), intact, {ids[DAMAGED]}, f"zeroed {s - a}+{n} of member {DAMAGED}",
                         min_errored=0, originals=payloads)
    for _ in range(20):  # across the end of one member and the start of the next
        s = rnd.randrange(b - 40, b - 1)
        n = rnd.randint(b - s + 1, b - s + 40)
        d = data[:s] + bytes(n) + data[s + n:]
        both = {ids[DAMAGED], ids[DAMAGED + 1]}
        assert_accounted(read(d), [x for x in ids if x not in both], both, f"zeroed {s}+{n} across members",
                         max_errored=2, originals=payloads)


def test_gzip_zero_length_members_cost_nothing(warc_gz, tmp_path):
    data, bounds, ids = warc_gz
    empty = gzip.compress(b"")
    read = Reader(tmp_path, "empty-member.warc.gz")
    for k in range(len(bounds) + 1):
        at = bounds[k][0] if k < len(bounds) else len(data)
        d = data[:at] + empty + data[at:]
        assert warcio_ids(data[:at]) + warcio_ids(data[at:]) == ids
        assert_accounted(read(d), ids, set(), f"zero-length member before member {k}", min_errored=0, max_errored=0)
    d = data[:bounds[2][0]] + empty * 3 + data[bounds[2][0]:bounds[4][0]] + empty + data[bounds[4][0]:]
    assert_accounted(read(d), ids, set(), "several zero-length members", min_errored=0, max_errored=0)


GARBAGE = {
    "text": b"this is not gzip at all\r\n",
    "random": random.Random(3).randbytes(300),
    "gzip magic, then junk": b"\x1f\x8b\x08\x00junkjunkjunk",
    "gzip magic, then zeros": b"\x1f\x8b\x08" + bytes(50),
    "a WARC line": b"WARC/1.0\r\nWARC-Type: response\r\n",
}


@pytest.mark.parametrize("kind", sorted(GARBAGE))
def test_gzip_garbage_between_members_is_one_errored_gap(warc_gz, tmp_path, kind):
    data, bounds, ids = warc_gz
    read = Reader(tmp_path, "garbage.warc.gz")
    for k in (1, DAMAGED, len(bounds) - 1):
        at = bounds[k][0]
        items = read(data[:at] + GARBAGE[kind] + data[at:])
        assert_accounted(items, ids, set(), f"{kind} before member {k}")
        (gap,) = [i for i in items if i.status == "errored"]
        assert gap.row["warc_offset"] == at and f"{at}-" in gap.detail
    items = read(data + GARBAGE[kind])  # after the last member
    assert_accounted(items, ids, set(), f"{kind} after the last member")


def test_gzip_nul_padding_between_members_is_not_damage(warc_gz, tmp_path):
    data, bounds, ids = warc_gz
    at = bounds[DAMAGED][0]
    items = Reader(tmp_path, "padded.warc.gz")(data[:at] + bytes(512) + data[at:] + bytes(100))
    assert_accounted(items, ids, set(), "NUL padding", min_errored=0, max_errored=0)


def test_gzip_member_that_is_not_a_warc_record(warc_gz, tmp_path):
    data, bounds, ids = warc_gz
    read = Reader(tmp_path, "notwarc.warc.gz")
    for payload in (b"<html><body>" + b"hello world " * 500 + b"</body></html>", b"id,name\n1,a\n", b"\n\n\n"):
        at = bounds[DAMAGED][0]
        items = read(data[:at] + gzip.compress(payload) + data[at:])
        blank = not payload.strip()
        assert_accounted(items, ids, set(), f"member of {payload[:12]!r}", min_errored=0 if blank else 1,
                         max_errored=0 if blank else 1)
        if not blank:
            (e,) = [i for i in items if i.status == "errored"]
            assert e.reason == "read:no_warc_version_line" and e.row["warc_offset"] == at


def test_whole_file_gzip_member_cut(warc_plain, tmp_path):
    """One gzip member for the whole file (``gzip file.warc``): a cut costs the record it falls in."""
    data, bounds, ids = warc_plain
    whole = gzip.compress(data, mtime=0)
    read = Reader(tmp_path, "whole.warc.gz")
    assert_accounted(read(whole), ids, set(), "whole-file member", min_errored=0, max_errored=0)
    rnd = random.Random(5)
    for c in sorted(rnd.sample(range(20, len(whole) - 1), 40)):
        out = zlib.decompressobj(31).decompress(whole[:c])  # what an independent inflater recovers
        done = [ids[k] for k, (_, b) in enumerate(bounds) if b <= len(out)]
        items = read(whole[:c])
        assert_accounted(items, done, set(ids) - set(done), f"whole-file member cut at {c}")


# ------------------------------------------------------------------ plain WARC

def test_plain_record_cut_at_every_offset(warc_plain, tmp_path, payloads):
    data, bounds, ids = warc_plain
    a, b = bounds[DAMAGED]
    prefix, suffix = data[:a], data[b:]
    intact = warcio_ids(prefix) + warcio_ids(suffix)
    read = Reader(tmp_path, "cut.warc")
    for c in range(1, b - a):
        # A cut inside the final CRLF CRLF leaves the record itself whole: then it is read, warned.
        whole = c >= b - a - 4
        for d, rest, where in ((data[:a + c] + suffix, intact, ""), (data[:a + c], warcio_ids(prefix), " (file end)")):
            assert_accounted(read(d), rest, {ids[DAMAGED]}, f"record {DAMAGED} cut after {c}{where}",
                             min_errored=0 if whole else 1, max_errored=0 if whole else 1, originals=payloads)
    assert read.n == 2 * (b - a - 1) > 1000


def test_plain_zeroed_ranges_and_garbage(warc_plain, tmp_path, payloads):
    data, bounds, ids, (a, b), intact = around_damaged(warc_plain)
    rnd = random.Random(2)
    read = Reader(tmp_path, "zeroed.warc")
    for s, n, d in zeroed_inside(data, a, b, rnd):
        items = read(d)
        # zeros in the HTML payload change the page but not its framing: it is read (different
        # text); zeros in the WARC header or its framing make it errored.
        read_ok = [i for i in items if i.row.get("warc_record_id") not in intact and i.status != "errored"]
        assert_accounted(items, intact, None, f"zeroed {s - a}+{n} of record {DAMAGED}",
                         min_errored=0 if read_ok else 1, max_errored=1)
    for kind, junk in GARBAGE.items():
        if kind == "a WARC line":
            continue  # that is a (truncated) record, tested with the cuts above
        for k in (1, DAMAGED, len(bounds) - 1):
            items = read(data[:bounds[k][0]] + junk + data[bounds[k][0]:])
            assert_accounted(items, ids, set(), f"{kind} before record {k}")


# ------------------------------------------------------------------ WARC-zstd

def test_warc_zst_frame_cut_at_every_offset(warc_plain, tmp_path, payloads):
    data, bounds, ids = warc_plain
    cctx = zstandard.ZstdCompressor(level=3, write_checksum=True)
    frames = [cctx.compress(data[a:b]) for a, b in bounds]
    before, frame, after = b"".join(frames[:DAMAGED]), frames[DAMAGED], b"".join(frames[DAMAGED + 1:])
    intact = [x for k, x in enumerate(ids) if k != DAMAGED]
    read = Reader(tmp_path, "cut.warc.zst")
    assert_accounted(read(b"".join(frames)), ids, set(), "intact .warc.zst", min_errored=0, max_errored=0)
    for c in range(1, len(frame)):
        assert_accounted(read(before + frame[:c] + after), intact, {ids[DAMAGED]},
                         f"frame {DAMAGED} cut after {c}", originals=payloads)
        assert_accounted(read(before + frame[:c]), ids[:DAMAGED], {ids[DAMAGED]},
                         f"frame {DAMAGED} cut after {c} (file end)", originals=payloads)
    for kind, junk in GARBAGE.items():
        assert_accounted(read(before + junk + frame + after), ids, set(), f"{kind} between frames")


# ------------------------------------------------------------------ JSONL, compressed

def _jsonl_lines(n: int = 12) -> list[bytes]:
    rnd = random.Random(11)
    return [(json.dumps({"id": f"d{i}", "text": " ".join(rnd.choice(_words()) for _ in range(20 + i))}) + "\n").encode()
            for i in range(n)]


def _complete_lines(decoded: bytes) -> list[str]:
    """Ids of the whole lines in a decoded prefix (the independent expectation)."""
    return [json.loads(ln)["id"] for ln in decoded.split(b"\n")[:-1]]


def _text_items(items):
    docs = [i.row["warc_record_id"] for i in items if i.status == "document"]
    errs = [i for i in items if i.status == "errored"]
    for e in errs:
        assert e.reason.startswith("read:") and e.detail and isinstance(e.row["warc_offset"], int)
    offsets = [i.row["warc_offset"] for i in items]
    assert offsets == sorted(offsets)
    return docs, errs


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_compressed_jsonl_cut_at_every_offset(tmp_path, codec):
    lines = _jsonl_lines()
    raw = b"".join(lines)
    if codec == "gzip":
        data = gzip.compress(raw, mtime=0)

        def decoded(cut: bytes) -> bytes:
            return zlib.decompressobj(31).decompress(cut)
    else:
        data = zstandard.ZstdCompressor(level=3).compress(raw)

        def decoded(cut: bytes) -> bytes:
            return zstandard.ZstdDecompressor().decompressobj().decompress(cut)
    read = Reader(tmp_path, f"cut.jsonl.{'gz' if codec == 'gzip' else 'zst'}")
    docs, errs = _text_items(read(data))
    assert docs == [f"d{i}" for i in range(len(lines))] and not errs
    for c in range(1, len(data)):
        docs, errs = _text_items(read(data[:c]))
        assert docs == _complete_lines(decoded(data[:c])), f"cut at {c}"
        assert [e.reason for e in errs] == ["read:corrupt_stream"], f"cut at {c}: {[e.detail for e in errs]}"


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_multi_member_jsonl_damaged_member_costs_its_lines(tmp_path, codec):
    """Four members of three lines each: a member cut short (the next one glued on) costs at most
    its own lines; the lines of the other members are all read."""
    lines = _jsonl_lines()
    groups = [b"".join(lines[k:k + 3]) for k in range(0, len(lines), 3)]
    comp = (lambda b: gzip.compress(b, mtime=0)) if codec == "gzip" else zstandard.ZstdCompressor().compress
    members = [comp(g) for g in groups]
    read = Reader(tmp_path, f"multi.jsonl.{'gz' if codec == 'gzip' else 'zst'}")
    others = [f"d{i}" for i in range(len(lines)) if not 3 <= i < 6]
    for c in range(1, len(members[1])):
        damaged = members[0] + members[1][:c] + b"".join(members[2:])
        docs, errs = _text_items(read(damaged))
        assert [d for d in docs if d in others] == others, f"member 1 cut at {c}: {docs}"
        assert set(docs) - set(others) <= {"d3", "d4", "d5"}
        assert 1 <= len(errs) <= 4, f"member 1 cut at {c}"
    docs, errs = _text_items(read(members[0] + b"garbage!" + b"".join(members[1:])))
    assert docs == [f"d{i}" for i in range(len(lines))] and [e.reason for e in errs] == ["read:corrupt_stream"]
