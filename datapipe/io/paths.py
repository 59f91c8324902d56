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


def _why(exc: BaseException) -> str:
    """Short cause of a failed fetch: the HTTP status if any error in the chain has one, else the
    exception type and its message (without a repeated URL)."""
    e, seen = exc, 0
    while e is not None and seen < 5:
        status = getattr(e, "status", None)
        if isinstance(status, int):
            return f"HTTP {status}" + (" (no such crawl id?)" if status in (403, 404) else "")
        e, seen = e.__cause__ or e.__context__, seen + 1
    if isinstance(exc, FileNotFoundError):
        return "HTTP 404 or no such file (no such crawl id?)"
    return f"{type(exc).__name__}"


def resolve_crawl(crawl: str, n_files: int, base_url: str, storage_options: dict | None = None) -> list[str]:
    """First ``n_files`` WARC URLs of a Common Crawl crawl, read from its ``warc.paths.gz``."""
    url = crawl_listing_url(crawl, base_url)

    def read():
        with fsspec.open(url, "rb", **(storage_options or {})) as fh:
            return gzip.decompress(fh.read()).decode("utf-8")
    try:
        listing = with_retries(read, what=url)
    except Exception as e:  # noqa: BLE001 - reported with the URL once and the HTTP status
        raise InputError(f"cannot read the file list of crawl {crawl} at {url}: {_why(e)}") from e
    paths = [ln.strip() for ln in listing.splitlines() if ln.strip()]
    if not paths:
        raise InputError(f"{url} lists no files")
    return [base_url.rstrip("/") + "/" + p for p in paths[:n_files]]


#: File names a directory input expands to (compression suffix removed first); other files are
#: skipped and listed (``datapipe run --dry-run``).
INPUT_EXTENSIONS = ("warc", "arc", "wet", "wat", "jsonl", "json", "ndjson", "parquet")
_COMPRESSION = (".gz", ".zst", ".zstd")


def has_input_extension(name: str) -> bool:
    """True when ``name`` (a file name or path) ends in a known input extension, compressed or not."""
    n = name.lower().rsplit("/", 1)[-1]
    for suffix in _COMPRESSION:
        if n.endswith(suffix):
            n = n[: -len(suffix)]
    return "." in n and n.rsplit(".", 1)[-1] in INPUT_EXTENSIONS


def canonical_input(path: str) -> str:
    """The identity of an input: the resolved real path of a local file (relative paths, ``./``,
    symlinks and ``file://`` all collapse to it), or the URL with scheme and host lower-cased, the
    default port dropped and ``//`` runs in the path collapsed. Task ids and document ids derive from it."""
    import os
    from urllib.parse import urlsplit, urlunsplit

    if path.startswith("file://"):
        path = path[len("file://"):]
    if not is_remote(path):
        return os.path.realpath(os.path.expanduser(path))
    u = urlsplit(path)
    scheme, host = u.scheme.lower(), (u.hostname or "").lower()
    port = u.port
    if port and not ((scheme == "http" and port == 80) or (scheme == "https" and port == 443)):
        host = f"{host}:{port}"
    if u.username:
        host = f"{u.username}@{host}"
    p = u.path
    while "//" in p:
        p = p.replace("//", "/")
    return urlunsplit((scheme, host, p, u.query, ""))


def input_identity(path: str, storage_options: dict | None = None, mode: str = "stat") -> dict:
    """What a phase-1 result depends on besides the configuration (``inputs.identity``).

    ``stat`` (default): canonical name, size in bytes and modification time (ns for local files;
    ETag / Last-Modified when a remote store gives them). A file replaced or rewritten in place
    reruns; one edited in place with its size and mtime put back (``touch -d``, ``os.utime``) does
    not. ``content``: a local file's sha256 as well (read in full the first time, then remembered by
    path, size, mtime, ctime and inode: a write in place moves the ctime, which ``utime`` cannot put
    back), so any change of its bytes reruns. Remote files count by their store's identity either way."""
    import os

    if not is_remote(path):
        try:
            st = os.stat(path)
        except OSError:  # gone since listing: its task fails and is errored (no fingerprint to keep)
            return {"path": path, "missing": True}
        out = {"path": path, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        if mode == "content":
            # Lazy: the hash cache is the engine's and imports this module.
            from datapipe.engine.check_cache import file_sha256

            out["sha256"] = file_sha256(path)
        return out
    try:
        fs, p = _fs(path, storage_options)
        info = fs.info(p)
    except Exception:  # noqa: BLE001 - no HEAD: the name alone identifies it
        return {"path": path}
    keep = {k: info.get(k) for k in ("size", "ETag", "etag", "LastModified", "last_modified", "mtime")
            if info.get(k) is not None}
    return {"path": path, **{k: str(v) for k, v in keep.items()}}


def _under(path: str, root: str | None) -> bool:
    return bool(root) and (path == root or path.startswith(root.rstrip("/") + "/"))


def is_run_folder(fs, path: str) -> bool:
    """True when ``path`` holds what a datapipe run writes: ``_tasks/``, or ``ledger.json`` beside
    ``_phases/``."""
    base = path.rstrip("/")
    return fs.isdir(f"{base}/_tasks") or (fs.isfile(f"{base}/ledger.json") and fs.isdir(f"{base}/_phases"))


def _run_folder_of(fs, root: str, path: str, memo: dict[str, bool]) -> str | None:
    """The outermost folder between ``root`` (excluded: the input folder the user named) and
    ``path`` that is a run folder (``is_run_folder``), or None. ``memo`` caches folder answers."""
    parts = path[len(root.rstrip("/")) + 1:].split("/")[:-1]
    d = root.rstrip("/")
    for part in parts:
        d = f"{d}/{part}"
        if d not in memo:
            memo[d] = is_run_folder(fs, d)
        if memo[d]:
            return d
    return None


class InputSet(list):
    """The resolved input files (a list of canonical names, sorted within each given path, first
    occurrence kept) plus ``skipped``: ``(path, why)`` for files left out during expansion and
    ``duplicates``: ``(given, canonical)`` for inputs naming a file already listed."""

    def __init__(self, files=(), skipped=(), duplicates=()):
        super().__init__(files)
        self.skipped = list(skipped)
        self.duplicates = list(duplicates)


def resolve_inputs(paths: list[str], crawl: str | None = None, crawl_files: int = 1,
                   base_url: str = "https://data.commoncrawl.org/",
                   storage_options: dict | None = None, output: str | None = None) -> InputSet:
    """Expand globs, directories and crawl ids into an ``InputSet`` of canonical input names.

    Directories expand recursively to files with a known input extension (``INPUT_EXTENSIONS``);
    dotfiles, other files, anything under ``output`` and any folder inside that holds another run's
    output (``is_run_folder``: a run's rejected documents are no input) are skipped and listed in
    ``skipped`` (such a run folder once, as the folder).
    Two spellings of one file (relative, absolute, symlink) are one input (``duplicates``).
    Raises InputError naming a path that matches nothing, does not exist, or lies under ``output``
    (the output of a run is never an input).
    """
    out_root = canonical_input(output) if output else None
    files: list[str] = []
    skipped: list[tuple[str, str]] = []
    dups: list[tuple[str, str]] = []
    seen: set[str] = set()
    listed_runs: set[str] = set()

    def add(given: str, name: str) -> None:
        c = canonical_input(name)
        if c in seen:
            dups.append((given, c))
            log.warning("input %s names %s, already an input: read once", given, c)
            return
        seen.add(c)
        files.append(c)

    for p in paths:
        if any(ch in p for ch in "*?["):
            fs, pattern = _fs(p, storage_options)
            found = sorted(fs.glob(pattern))
            if not found:
                raise InputError(f"input pattern matches no files: {p}")
            proto = p.split("://")[0] + "://" if is_remote(p) else ""
            for f in found:
                full = proto + f if proto and not f.startswith(proto) else f
                if _under(canonical_input(full), out_root):
                    skipped.append((full, "inside the output directory"))
                else:
                    add(p, full)
        elif is_remote(p):
            add(p, p)
        else:
            fs, lp = _fs(p, storage_options)
            if not fs.exists(lp):
                raise InputError(f"input file not found: {p}")
            if _under(canonical_input(lp), out_root):
                raise InputError(f"input {p} lies inside the output directory {output}: a run never reads "
                                 "its own output; choose another --output")
            if fs.isdir(lp):
                n_before = len(files)
                runs: dict[str, bool] = {}
                for f in sorted(fs.find(lp)):
                    name = f.split("/")[-1]
                    run = _run_folder_of(fs, lp, f, runs)
                    if _under(canonical_input(f), out_root):
                        skipped.append((f, "inside the output directory"))
                    elif run is not None:
                        if run not in listed_runs:
                            listed_runs.add(run)
                            skipped.append((run, "a datapipe run folder (holds _tasks/, or ledger.json and "
                                                 "_phases/): its files are a run's output, never inputs"))
                    elif name.startswith(".") or any(part.startswith(".") for part in
                                                     f[len(lp.rstrip("/")) + 1:].split("/")[:-1]):
                        skipped.append((f, "hidden file"))
                    elif not has_input_extension(name):
                        skipped.append((f, "not an input extension (" + ", ".join(INPUT_EXTENSIONS) + ")"))
                    else:
                        add(p, f)
                if len(files) == n_before:
                    raise InputError(f"input directory has no input files: {p}"
                                     + (f" ({len(skipped)} other file(s) skipped)" if skipped else ""))
            else:
                add(p, lp)
    if crawl:
        for u in resolve_crawl(crawl, crawl_files, base_url, storage_options):
            add(crawl, u)
    if skipped:
        log.info("%d file(s) skipped while expanding inputs (see datapipe run --dry-run)", len(skipped))
    return InputSet(files, skipped, dups)


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
