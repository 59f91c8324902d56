"""WARC-zstd files (IIPC "Zstandard Compression for WARC Files 1.0"): what the format is.

A ``.warc.zst`` file is a sequence of zstd frames, one WARC record each, optionally preceded by
a dictionary frame: a skippable frame with magic 0x184D2A5D whose payload is the zstd dictionary
(itself possibly zstd-compressed), used to decompress every later frame. Other skippable frames
(0x184D2A50-0x184D2A5F) are extension data, not records, and are skipped.

The frames are read by ``datapipe.io.members`` (``members(raw, "zstd", dictionary=True)``), the
same way as gzip members: each frame is walked block by block, so its compressed extent is known
without decoding it, no block decodes to more than 128 KiB at a time, and a corrupt or cut frame
costs one record (``corrupt_zstd_frame``, ``truncated_zstd_frame``; a dictionary that cannot be
loaded is one ``bad_zstd_dictionary`` item, then every frame fails as corrupt; bytes that start no
frame are ``garbage_between_frames`` / ``garbage_after_last_frame``).
"""
from __future__ import annotations

from datapipe.io.members import DICT_MAGIC, ZSTD_MAGIC, sniff

__all__ = ["DICT_MAGIC", "ZSTD_MAGIC", "is_zstd"]


def is_zstd(head: bytes) -> bool:
    """True if ``head`` (the first 4 bytes of a file) starts a zstd frame or a skippable frame."""
    return sniff(head) == "zstd"
