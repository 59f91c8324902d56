"""Input resolution and file access through fsspec (local paths, globs, http(s)://, s3://).

``resolve_inputs`` expands globs and resolves a Common Crawl crawl id through its
``crawl-data/<ID>/warc.paths.gz`` listing. Remote files are streamed (fsspec block cache), not
downloaded first; transient errors are retried with exponential backoff.
"""
from __future__ import annotations

import gzip
import io
import logging
import time
from contextlib import contextmanager
from typing import Iterator

import fsspec

log = logging.getLogger("datapipe")
_TRANSIENT = (ConnectionError, TimeoutError, OSError)
#: HTTP statuses worth retrying (server busy, gateway trouble, throttling).
TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
RETRY_ATTEMPTS = 5
RETRY_BASE_DELAY = 0.5


class InputError(RuntimeError):
    """An input path cannot be resolved or read."""


def is_remote(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _fs(path: str, storage_options: dict | None):
    fs, p = fsspec.core.url_to_fs(path, **(storage_options or {}))
    return fs, p


def is_transient(exc: BaseException) -> bool:
    """True for errors that a retry may cure: connection trouble, timeouts, HTTP 5xx/429.

    fsspec's HTTP filesystem reports a failed HEAD+GET as ``FileNotFoundError`` *from* the
    underlying response error, so the cause decides; a real 404 or a permission error is final.
    """
    seen = 0
    while exc is not None and seen < 5:
        seen += 1
        status = getattr(exc, "status", None)  # aiohttp.ClientResponseError
        if isinstance(status, int):
            return status in TRANSIENT_STATUS
        if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
            exc = exc.__cause__
            continue
        if isinstance(exc, _TRANSIENT):
            return True
        mod = type(exc).__module__ or ""
        if mod.startswith("aiohttp") or type(exc).__name__ == "FSTimeoutError":
            return True  # connection reset, payload cut short, server disconnected, timeout
        return False
    return False


def with_retries(fn, *, attempts: int | None = None, base_delay: float | None = None, what: str = ""):
    """Call ``fn()``; on a transient error (``is_transient``) retry with delays base*2^k.

    Re-raises the last error, or at once an error that is not transient (404, permission).
    """
    attempts = RETRY_ATTEMPTS if attempts is None else attempts
    base_delay = RETRY_BASE_DELAY if base_delay is None else base_delay
    for k in range(attempts):
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - classified below
            if k == attempts - 1 or not is_transient(e):
                raise
            log.warning("transient error on %s (attempt %d/%d): %s", what or "input", k + 1, attempts, e)
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


class RetryingReader(io.RawIOBase):
    """A read-only stream over an fsspec file that survives transient errors mid-file.

    Remote files are read in blocks (ranged GETs for http(s)://, ranged GetObject for s3://), so
    a file is streamed, never downloaded first. If a read fails with a transient error the file
    is opened again, positioned where the failed read started, and the read repeated (with
    backoff, ``with_retries``); readers above never see the hiccup.
    """

    def __init__(self, opener, what: str):
        super().__init__()
        self._opener = opener
        self._what = what
        self._pos = 0
        self._fh = with_retries(opener, what=what)

    def _reopen(self):
        try:
            self._fh.close()
        except Exception:  # noqa: BLE001 - the broken handle is discarded anyway
            pass
        self._fh = self._opener()
        if self._pos:
            self._fh.seek(self._pos)

    def read(self, size: int = -1) -> bytes:
        first = [True]

        def attempt():
            if not first[0]:
                self._reopen()
            first[0] = False
            return self._fh.read(size)
        data = with_retries(attempt, what=self._what)
        self._pos += len(data)
        return data

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = with_retries(lambda: self._fh.seek(offset, whence), what=self._what)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        if not self.closed:
            try:
                self._fh.close()
            finally:
                super().close()


@contextmanager
def open_input(path: str, storage_options: dict | None = None) -> Iterator[io.RawIOBase]:
    """Open an input for binary streaming (no decompression: readers detect gzip themselves).

    Opening and every read are retried with exponential backoff on transient errors.
    """
    def op():
        return fsspec.open(path, "rb", compression=None, **(storage_options or {})).open()
    fh = RetryingReader(op, path)
    try:
        yield fh
    finally:
        fh.close()
