"""Pack a per-record-gzip WARC as one zstd stream (smaller to carry) and rebuild it byte for byte."""
import hashlib
import json
import struct
import sys
import zlib

import zstandard


def pack(src, dst):
    data = open(src, "rb").read()
    raws, heads, pos = [], [], 0
    while pos < len(data):
        d = zlib.decompressobj(31)
        raw = d.decompress(data[pos:]); raw += d.flush()
        used = len(data) - pos - len(d.unused_data)
        heads.append(data[pos:pos + 10].hex()); raws.append(raw); pos += used
    meta = {"sha256": hashlib.sha256(data).hexdigest(), "heads": heads, "lens": [len(r) for r in raws]}
    mb = json.dumps(meta).encode()
    c = zstandard.ZstdCompressor(level=19, threads=-1, write_content_size=True)
    open(dst, "wb").write(struct.pack("<Q", len(mb)) + mb + c.compress(b"".join(raws)))

def unpack(src, dst):
    blob = open(src, "rb").read()
    n = struct.unpack("<Q", blob[:8])[0]; meta = json.loads(blob[8:8 + n])
    raw = zstandard.ZstdDecompressor().decompress(blob[8 + n:])
    out, pos = [], 0
    for h, L in zip(meta["heads"], meta["lens"]):
        r = raw[pos:pos + L]; pos += L
        c = zlib.compressobj(9, zlib.DEFLATED, -15)
        out.append(bytes.fromhex(h) + c.compress(r) + c.flush() + struct.pack("<II", zlib.crc32(r), L & 0xFFFFFFFF))
    data = b"".join(out); open(dst, "wb").write(data)
    ok = hashlib.sha256(data).hexdigest() == meta["sha256"]
    print(f"unpacked {dst}: {len(data)} B, sha256 matches original: {ok}", flush=True)

if __name__ == "__main__":
    {"pack": pack, "unpack": unpack}[sys.argv[1]](sys.argv[2], sys.argv[3])
