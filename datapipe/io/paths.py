"""Input resolution and file access through fsspec (local paths, globs, http(s)://, s3://).

``resolve_inputs`` expands globs and resolves a Common Crawl crawl id through its
``crawl-data/<ID>/warc.paths.gz`` listing. Remote files are streamed (fsspec block cache), not
downloaded first; transient errors are retried with exponential backoff.
"""
from __future__ import annotations

import gzip
import io
import time
from contextlib import contextmanager
from typing import Iterator

import fsspec

_TRANSIENT = (ConnectionError, TimeoutError, OSError)


class InputError(RuntimeError):
    """An input path cannot be resolved or read."""


def is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _fs(path: str, storage_options: dict | None):
    fs, p = fsspec.core.url_to_fs(path, **(storage_options or {}))
    return fs, p


def with_retries(fn, *, attempts: int = 4, base_delay: float = 0.5, what: str = ""):
    """Call ``fn()``; on a transient I/O error retry with delays base*2^k. Re-raises the last error."""
    for k in range(attempts):
        try:
            return fn()
        except FileNotFoundError:
            raise
        except _TRANSIENT:
            if k == attempts - 1:
                raise
            time.sleep(base_delay * (2 ** k))
    raise AssertionError("unreachable")


def crawl_listing_url(crawl: str, base_url: str) -> str:
    return base_url.rstrip("/") + f"/crawl-data/{crawl}/warc.paths.gz"


def resolve_crawl(crawl: str, n_files: int, base_url: str, storage_options: dict | None = None) -> list[str]:
    """First ``n_files`` WARC URLs of a Common Crawl crawl, read from its ``warc.paths.gz``."""
    url = crawl_listing_url(crawl, base_url)

    def read():
        with fsspec.open(url, "rb", **(storage_options or {})) as fh:
            return gzip.decompress(fh.read()).decode("utf-8")
    try:
        listing = with_retries(read, what=url)
    except Exception as e:  # noqa: BLE001 - reported with the URL
        raise InputError(f"cannot read the file list of crawl {crawl} at {url}: {e}") from e
    paths = [ln.strip() for ln in listing.splitlines() if ln.strip()]
    if not paths:
        raise InputError(f"{url} lists no files")
    return [base_url.rstrip("/") + "/" + p for p in paths[:n_files]]


def resolve_inputs(paths: list[str], crawl: str | None = None, crawl_files: int = 1,
                   base_url: str = "https://data.commoncrawl.org/",
                   storage_options: dict | None = None) -> list[str]:
    """Expand globs and crawl ids into a sorted, de-duplicated list of input files.

    Raises InputError naming a path that matches nothing or does not exist.
    """
    out: list[str] = []
    for p in paths:
        if any(ch in p for ch in "*?[") :
            fs, pattern = _fs(p, storage_options)
            found = sorted(fs.glob(pattern))
            if not found:
                raise InputError(f"input pattern matches no files: {p}")
            proto = p.split("://")[0] + "://" if is_remote(p) else ""
            out.extend(proto + f if proto and not f.startswith(proto) else f for f in found)
        elif is_remote(p):
            out.append(p)
        else:
            fs, lp = _fs(p, storage_options)
            if not fs.exists(lp):
                raise InputError(f"input file not found: {p}")
            if fs.isdir(lp):
                found = sorted(f for f in fs.find(lp) if not f.split("/")[-1].startswith("."))
                if not found:
                    raise InputError(f"input directory is empty: {p}")
                out.extend(found)
            else:
                out.append(lp)
    if crawl:
        out.extend(resolve_crawl(crawl, crawl_files, base_url, storage_options))
    seen = set()
    return [p for p in out if not (p in seen or seen.add(p))]


@contextmanager
def open_input(path: str, storage_options: dict | None = None) -> Iterator[io.RawIOBase]:
    """Open an input for binary streaming (no decompression: readers detect gzip themselves)."""
    def op():
        return fsspec.open(path, "rb", compression=None, **(storage_options or {})).open()
    fh = with_retries(op, what=path)
    try:
        yield fh
    finally:
        fh.close()
