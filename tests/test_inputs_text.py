"""Inputs beyond CC WARC: JSONL / Parquet documents, WARC-zstd, splitting into tasks, Dolma export.

Expected values are computed here from the raw files (gzip/zlib/json/hashlib), not by the readers.
"""
import gzip
import hashlib
import io
import json
import struct
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from datapipe.engine import runner
from datapipe.engine.ledger import Ledger
from datapipe.engine.task import run_file_task
from datapipe.engine.task_plan import chain_fingerprint, plan_specs
from datapipe.io.readers import detect_format, read_input
from datapipe.manifest.load import ManifestError, load_manifest

CHAIN = [{"extract": {}}, {"langid": {"min_score": 0.5}}, {"gopher_repetition": {}}, {"gopher_quality": {}},
         {"fineweb": {}}]


def sha_id(key: str) -> str:
    return hashlib.sha1(key.encode()).hexdigest()[:32]


def jsonl_lines(path: Path) -> list[bytes]:
    return gzip.decompress(path.read_bytes()).splitlines(keepends=True)


def offsets(lines: list[bytes]) -> list[int]:
    out, pos = [], 0
    for ln in lines:
        out.append(pos)
        pos += len(ln)
    return out


@pytest.fixture(scope="module")
def cc_text(data_dir):
    files = sorted((data_dir / "cc_text").glob("*.jsonl.gz"))
    assert len(files) == 3
    return files


def linked(files: list[Path], tmp_path: Path) -> list[Path]:
    """``files`` as seen through a symlinked folder (as a symlinked ``../shared`` shows them)."""
    link = tmp_path / "linked-inputs"
    link.symlink_to(files[0].parent.resolve(), target_is_directory=True)
    return [link / f.name for f in files]


def real_id(path: Path, offset: int) -> str:
    """A text record's id: the input is identified by its real path, whatever path named it."""
    return sha_id(f"{path.resolve()}:{offset}")


def rows(out: Path, kind: str) -> list[dict]:
    files = sorted((out / kind).glob("*.parquet"))
    return [r for f in files for r in pq.read_table(f).to_pylist()]


# ----------------------------------------------------------------- real Dolma CC text, whole run

def test_cc_text_through_the_chain_and_dolma_export(cc_text, tmp_path, lid_model, warm_client):
    cc_text = linked(cc_text, tmp_path)  # named through a symlink: ids come from the real path
    out = tmp_path / "run"
    m = tmp_path / "m.yaml"
    m.write_text(json.dumps({"name": "t", "inputs": {"paths": [str(p) for p in cc_text]}, "output": str(out),
                             "cluster": {"workers": 1, "dashboard_address": "127.0.0.1:0"},
                             "output_formats": ["parquet", "dolma_jsonl"], "stages": CHAIN}))
    res = runner.run(load_manifest(m), client=warm_client)
    expect = {}  # our id -> input object
    for p in cc_text:
        lines = jsonl_lines(p)
        for off, ln in zip(offsets(lines), lines):
            expect[real_id(p, off)] = json.loads(ln)
    assert len(expect) == 30
    led = Ledger.from_dict(json.loads((out / "ledger.json").read_text()))
    led.check()
    assert led.records_by_type == {"text": 30}
    assert led.stages["read"].n_in == 30 and led.stages["read"].kept == 30
    ex = led.stages["extract"]
    assert (ex.n_in, ex.kept, ex.n_rejected, ex.n_errored) == (30, 30, 0, 0)  # text passes through
    kept, rejected = rows(out, "documents"), rows(out, "rejected")
    assert not (out / "errors").exists()
    assert len(kept) == led.kept and len(kept) + len(rejected) == 30
    assert {r["id"] for r in kept + rejected} == set(expect)
    for r in kept + rejected:
        src = expect[r["id"]]
        assert r["text"] == src["text"] and r["warc_record_id"] == src["id"] and r["record_type"] == "text"
        assert r["url"] == src["metadata"]["url"] and r["warc_date"] == src["created"]
        assert json.loads(r["metadata"]) == {k: v for k, v in src.items() if k not in ("text", "id", "created")}
        # CCNet tagged every document English with score >= 0.94; fastText agrees.
        assert src["metadata"]["language"] == "en" and r["lang"] == "en"
    assert 0 < len(kept) < 30  # the quality rules keep some and reject some of these pages
    assert res.phases["dolma_jsonl"]["documents"] == len(kept)
    exported = []
    for f in sorted((out / "dolma").glob("*.jsonl.zst")):
        data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(f.read_bytes())).read()
        exported += [json.loads(ln) for ln in data.splitlines()]
    assert sorted(d["id"] for d in exported) == sorted(r["id"] for r in kept)
    for d in exported:
        src = expect[d["id"]]
        assert (d["text"], d["source"], d["created"], d["added"]) == (src["text"], "common-crawl", src["created"],
                                                                     src["added"])
        assert d["metadata"]["url"] == src["metadata"]["url"] and d["metadata"]["lang"] == "en"
        assert d["metadata"]["cc_segment"] == src["metadata"]["cc_segment"]


# ----------------------------------------------------------------- bad lines, compression, splits

def _bad_file(cc_text, tmp_path) -> tuple[Path, list[bytes]]:
    """All 30 real lines with, after line 7, a non-JSON line, a line without text, a blank line."""
    lines = [ln for p in cc_text for ln in jsonl_lines(p)]
    lines = lines[:7] + [b'{"id": "broken", "text": "cut\n', b'{"id": "no-text", "txt": "x"}\n', b"\n"] + lines[7:]
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"".join(lines))
    return path, lines


def _run(path, tmp_path, name, fmt="auto", split_bytes=0, chain=CHAIN[:2]):
    fp = chain_fingerprint(chain)
    specs = plan_specs([str(path)], str(tmp_path / name), chain, fp, fmt, split_bytes=split_bytes)
    recs = [run_file_task(s) for s in specs]
    led = Ledger()
    for r in recs:
        led.merge(Ledger.from_dict(r["ledger"]))
    led.check()
    return specs, led, tmp_path / name


def test_bad_lines_are_errored_with_line_numbers_and_reading_goes_on(cc_text, tmp_path, lid_model):
    path, lines = _bad_file(cc_text, tmp_path)
    for variant, data in (("plain", path.read_bytes()), ("zst", zstandard.ZstdCompressor().compress(path.read_bytes())),
                          ("gz", gzip.compress(path.read_bytes()))):
        p = tmp_path / f"mixed-{variant}.jsonl" if variant == "plain" else tmp_path / f"mixed.jsonl.{variant}"
        p.write_bytes(data)
        _, led, out = _run(p, tmp_path, f"out-{variant}")
        read = led.stages["read"]
        assert read.n_in == len(lines) == 33
        assert read.errored == {"read:invalid_json": 1, "read:missing_text": 1}
        assert read.rejected == {"non_document:blank_line": 1}
        errs = sorted(rows(out, "errors"), key=lambda r: r["warc_offset"])
        assert [e["error_reason"].split(":")[:3] for e in errs] == [["read", "invalid_json", " line 8"],
                                                                    ["read", "missing_text", " line 9"]]
        assert [e["warc_offset"] for e in errs] == [offsets(lines)[7], offsets(lines)[8]]
        assert len(rows(out, "_filtered")) + len(rows(out, "rejected")) == 30  # every real line after them too


def test_lone_surrogate_escapes_are_replaced_not_a_lost_file(cc_text, tmp_path, lid_model):
    # "\\ud800" is valid JSON but no UTF-8 writer takes the str json.loads makes of it: it used to
    # error the whole file (task:exception:UnicodeEncodeError), losing every line of it.
    lines = jsonl_lines(cc_text[0])
    doc = json.loads(lines[0])
    bad = [b'{"id": "s1", "text": "lone \\ud800 in text. ' + doc["text"].encode()[:300].replace(b'"', b"")
           .replace(b"\\", b"").replace(b"\n", b" ") + b'"}\n',
           b'{"id": "s2\\udc00", "text": "an id with a lone low surrogate", "extra": {"k\\udfff": "v"}}\n',
           b'{"id": "pair", "text": "a real pair \\ud83d\\ude00 stays"}\n']
    path = tmp_path / "surrogates.jsonl"
    path.write_bytes(b"".join(lines[:3] + bad + lines[3:6]))
    _, led, out = _run(path, tmp_path, "out")
    read = led.stages["read"]
    assert (read.n_in, read.kept, read.n_errored) == (9, 9, 0)
    got = {r["warc_record_id"]: r for r in rows(out, "_filtered") + rows(out, "rejected")}
    assert len(got) == 9
    assert got["s1"]["text"].startswith("lone \ufffd in text. ") and got["s1"]["warnings"] == ["lone_surrogate"]
    s2 = got["s2\ufffd"]
    assert json.loads(s2["metadata"]) == {"extra": {"k\ufffd": "v"}} and s2["warnings"] == ["lone_surrogate"]
    assert got["pair"]["text"] == "a real pair \U0001F600 stays" and not got["pair"]["warnings"]


def test_truncated_compressed_jsonl_ends_in_one_errored_item(cc_text, tmp_path):
    lines = jsonl_lines(cc_text[0])
    data = gzip.compress(b"".join(lines))
    p = tmp_path / "cut.jsonl.gz"
    p.write_bytes(data[: len(data) * 2 // 3])
    items = list(read_input(str(p)))
    assert [i.reason for i in items if i.status == "errored"] == ["read:corrupt_stream"] and items[-1].status == "errored"
    docs = [i.row["text"] for i in items if i.status == "document"]
    assert 0 < len(docs) < 10 and docs == [json.loads(ln)["text"] for ln in lines[: len(docs)]]


def test_split_jsonl_gives_the_same_documents_as_one_task(cc_text, tmp_path, lid_model):
    path, lines = _bad_file(cc_text, tmp_path)
    one_specs, one_led, one = _run(path, tmp_path, "one")
    many_specs, many_led, many = _run(path, tmp_path, "many", split_bytes=20_000)
    size = path.stat().st_size
    assert len(one_specs) == 1 and len(many_specs) == -(-size // 20_000) > 3
    assert len({s.task_id for s in many_specs}) == len(many_specs)
    assert [s.part for s in many_specs][0] == (0, 20_000) and many_specs[-1].part[1] == size
    assert one_led.to_dict()["stages"].keys() == many_led.to_dict()["stages"].keys()
    for name in one_led.stages:
        a, b = one_led.stages[name], many_led.stages[name]
        assert (a.n_in, a.kept, a.rejected, a.errored) == (b.n_in, b.kept, b.rejected, b.errored)
    for kind in ("_filtered", "rejected", "errors"):
        key = lambda r: r["id"]  # noqa: E731
        drop = ("source",)
        strip = lambda rs: sorted(({k: v for k, v in r.items() if k not in drop} for r in rs), key=key)  # noqa: E731
        assert strip(rows(one, kind)) == strip(rows(many, kind)), kind
    # the bad lines sit in the first part; their absolute line numbers are right in any part
    errs = sorted(rows(many, "errors"), key=lambda r: r["warc_offset"])
    assert [e["error_reason"].split(": ")[1] for e in errs] == ["line 8", "line 9"]


def test_bad_line_in_a_later_part_reports_its_absolute_line_number(cc_text, tmp_path):
    lines = [ln for p in cc_text for ln in jsonl_lines(p)]
    lines.insert(25, b"not json at all\n")
    path = tmp_path / "late.jsonl"
    path.write_bytes(b"".join(lines))
    from datapipe.io.jsonl import byte_ranges
    parts = byte_ranges(str(path), path.stat().st_size, 10_000)
    got = [(i.reason, i.detail.split(":")[0]) for part in parts for i in read_input(str(path), part=part)
           if i.status == "errored"]
    assert got == [("read:invalid_json", "line 26")]


def test_parquet_documents_by_row_groups(cc_text, tmp_path):
    objs = [json.loads(ln) for p in cc_text for ln in jsonl_lines(p)]
    # FineWeb's layout; one row without text
    t = pa.table({"text": [o["text"] for o in objs[:-1]] + [None], "id": [f"<urn:{i}>" for i in range(30)],
                  "dump": ["CC-MAIN-2020-16"] * 30, "url": [o["metadata"]["url"] for o in objs],
                  "date": [o["created"] for o in objs], "token_count": list(range(30))})
    path = tmp_path / "fw.parquet"
    pq.write_table(t, path, row_group_size=7)
    whole = list(read_input(str(path)))
    specs = plan_specs([str(path)], str(tmp_path / "o"), [], "x", split_bytes=1)
    assert [s.part for s in specs] == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    parts = [i for s in specs for i in read_input(s.input, "parquet", None, s.fields, s.part)]
    assert [i.row for i in parts] == [i.row for i in whole]
    assert [i.status for i in whole] == ["document"] * 29 + ["errored"]
    assert whole[-1].reason == "read:missing_text" and whole[-1].detail.startswith("row 29:")
    r = whole[12].row
    assert (r["text"], r["url"], r["warc_record_id"], r["warc_offset"], r["id"]) == (
        objs[12]["text"], objs[12]["metadata"]["url"], "<urn:12>", 12, sha_id(f"{path}:12"))
    assert json.loads(r["metadata"]) == {"dump": "CC-MAIN-2020-16", "token_count": 12}


def test_formats_and_manifest_options(tmp_path):
    assert [detect_format(p) for p in ("a.warc.zst", "a.jsonl", "b.json.gz", "c.jsonl.zst", "d.parquet", "e.wet.gz")] \
        == ["warc", "jsonl", "jsonl", "jsonl", "parquet", "warc"]
    m = tmp_path / "m.yaml"
    m.write_text("inputs:\n  paths: [x.jsonl]\n  preset: dolmaa\noutput: o\n")
    with pytest.raises(ManifestError, match=r"m.yaml:3: inputs.preset: .*unknown field preset 'dolmaa'"):
        load_manifest(m)
    m.write_text("inputs:\n  paths: [x.jsonl]\n  fields: {txt: body}\noutput: o\n")
    with pytest.raises(ManifestError, match=r"m.yaml:3: inputs.fields: .*unknown field mapping key.*'txt'"):
        load_manifest(m)


# ----------------------------------------------------------------- WARC-zstd

def warc_records(gz: Path) -> list[bytes]:
    """The records of a WARC file, split by their Content-Length (independent of datapipe's parser)."""
    with gzip.open(gz) as fh:
        data, out, pos = fh.read(), [], 0
    while pos < len(data):
        end = data.index(b"\r\n\r\n", pos) + 4
        cl = int(next(ln.split(b":", 1)[1] for ln in data[pos:end].split(b"\r\n") if ln.lower().startswith(b"content-length:")))
        out.append(data[pos:end + cl + 4])
        pos = end + cl + 4
    return out


def dict_frame(dictionary: zstandard.ZstdCompressionDict, compress: bool) -> bytes:
    """The WARC-zstd dictionary frame: skippable frame 0x184D2A5D holding the (optionally compressed) dictionary."""
    raw = dictionary.as_bytes()
    payload = zstandard.ZstdCompressor().compress(raw) if compress else raw
    return struct.pack("<II", 0x184D2A5D, len(payload)) + payload


def _sig(items):
    return [(i.status, i.reason, {k: v for k, v in i.row.items() if k not in ("source", "warc_file", "warc_offset")})
            for i in items]


@pytest.fixture(scope="module")
def realpages(data_dir):
    gz = data_dir / "warc" / "realpages-1171.warc.gz"
    return gz, warc_records(gz)


def test_warc_zst_gives_the_same_documents_as_warc_gz(realpages, tmp_path):
    gz, records = realpages
    assert len(records) == 1171
    expect = _sig(read_input(str(gz)))
    assert Counter(s for s, _, _ in expect) == Counter(document=1171)
    dictionary = zstandard.train_dictionary(16_384, [r[:4096] for r in records[::4]])
    cctx, dctx = zstandard.ZstdCompressor(level=1), zstandard.ZstdCompressor(level=1, dict_data=dictionary)
    plain = b"".join(cctx.compress(r) for r in records)  # one frame a record
    with_dict = b"".join(dctx.compress(r) for r in records)
    for name, data in (("plain", plain), ("dict", dict_frame(dictionary, False) + with_dict),
                       ("zdict", dict_frame(dictionary, True) + with_dict)):
        p = tmp_path / f"rp-{name}.warc.zst"
        p.write_bytes(data)
        assert _sig(read_input(str(p))) == expect, name
    assert (tmp_path / "rp-dict.warc.zst").stat().st_size < (tmp_path / "rp-plain.warc.zst").stat().st_size


def test_damaged_warc_zst_costs_one_record(data_dir, tmp_path):
    src = data_dir / "warc" / "resiliparse_CC-MAIN-2020-34_excerpt.warc.gz"
    records = warc_records(src)
    assert len(records) == 50
    expect = _sig(read_input(str(src)))
    cctx = zstandard.ZstdCompressor()
    frames = [cctx.compress(r) for r in records]
    bad = list(frames)
    bad[20] = bad[20][:8] + bytes(b ^ 0xFF for b in bad[20][8:40]) + bad[20][40:]
    p = tmp_path / "bad.warc.zst"
    p.write_bytes(b"".join(bad))
    got = _sig(read_input(str(p)))
    assert len(got) == 50 and got[20][0] == "errored" and got[20][1].startswith("read:corrupt_zstd_frame")
    assert got[:20] + got[21:] == expect[:20] + expect[21:]
    p.write_bytes(b"".join(frames)[:-50])  # cut inside the last frame
    got = _sig(read_input(str(p)))
    assert len(got) == 50 and got[-1][:2] == ("errored", "read:truncated_zstd_frame") and got[:-1] == expect[:-1]


def test_cc_text_through_global_dedup(cc_text, tmp_path, lid_model, warm_client):
    """The real Dolma CC documents plus a byte-identical copy of one file under another name: the
    dedup phase must reject exactly one document of each copied pair that phase 1 kept, keeping the
    smaller id (same WARC date), and the ledger must still balance."""
    import shutil

    cc_text = linked(cc_text, tmp_path)  # named through a symlink: ids come from the real path
    copy = tmp_path / "copy-of-0091.jsonl.gz"
    shutil.copy(cc_text[0], copy)
    out = tmp_path / "run"
    m = tmp_path / "m.yaml"
    m.write_text(json.dumps({"name": "t", "inputs": {"paths": [str(p) for p in cc_text] + [str(copy)]},
                             "output": str(out), "cluster": {"workers": 2, "dashboard_address": "127.0.0.1:0"},
                             "stages": CHAIN, "dedup": {"exact": True}}))
    runner.run(load_manifest(m), client=warm_client)
    led = Ledger.from_dict(json.loads((out / "ledger.json").read_text()))
    led.check()
    lines = jsonl_lines(cc_text[0])
    pairs = {real_id(cc_text[0], o): real_id(copy, o) for o in offsets(lines)}
    rejected = rows(out, "rejected")
    phase1_kept = {r["id"] for r in rows(out, "documents")} | {r["id"] for r in rejected
                                                                if r["reject_stage"] == "dedup"}
    expected = {max(a, b): min(a, b) for a, b in pairs.items() if a in phase1_kept}  # loser -> representative
    assert expected, "some documents of the copied file must survive phase 1"
    got = {r["id"]: r["duplicate_of"] for r in rejected if r["reject_reason"] == "dedup:exact"}
    assert got == expected
    assert led.stages["dedup_exact"].rejected["dedup:exact"] == len(expected)
