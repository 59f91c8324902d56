"""What a reader yields: ``ReadItem`` (one record's fate) and the id and provenance helpers every
reader shares (``doc_id``, ``host_of``, ``file_row``)."""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass
class ReadItem:
    row: dict
    status: str = "document"      # document | rejected | errored
    reason: str | None = None     # ledger key, e.g. read:invalid_json
    detail: str | None = None     # where/why for this one record (e.g. "line 17: ..."), not counted


def doc_id(key: str) -> str:
    """Stable document id: first 16 bytes of SHA-1 of the WARC-Record-ID (or source:offset), hex."""
    return hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def host_of(url: str | None) -> str | None:
    if not url:
        return None
    try:
        h = urlsplit(url).hostname
    except ValueError:
        return None
    return h.lower().rstrip(".") if h else None



def file_row(path: str, offset: int = 0) -> dict:
    """Provenance fields of an errored item that stands for a whole file (or the rest of one)."""
    return {"id": doc_id(f"{path}:file:{offset}"), "source": path,
            "warc_file": os.path.basename(path.rstrip("/")), "warc_offset": offset, "record_type": "file"}
