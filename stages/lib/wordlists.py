"""Loading and matching the block lists and word lists used by ``stages/url_blocklist.py`` and ``stages/ldnoobw.py``.

Everything here is loaded once per worker process (``functools.lru_cache`` keyed by path), so
several stage instances in one worker share the memory.

* UT1 adult domains (``blocklists/ut1_adult_url_filterblacklistsv0_3_0.tar.gz``, 4,558,940
  domains, 123.6 MB): stored as a sorted ``numpy.uint64`` array of xxh3-64 hashes (36 MB instead
  of ~400 MB for a Python set), looked up with ``numpy.searchsorted``. The chance that a domain
  that is not on the list collides with one of the 4.6 M hashes is about 4.6e6 / 2**64 = 2.5e-13
  per lookup. Building the array takes ~6 s; it is cached as ``.npy`` under ``cache_dir()`` keyed
  by the tarball's size and mtime, so later workers load it in well under a second. The ``urls``
  member (host/path entries) sits after ``domains`` in the tarball, so reading it inflates the whole
  123 MB again (~0.6 s, a worker's largest start-up cost after the models): it is cached beside the
  array as one UTF-8 line per entry, the same key.
* DataTrove URL-filter words (``wordlists/datatrove_url_filter/``): normalised like DataTrove
  (lower case, everything but ``[a-z0-9]`` removed); sub-words go into a ``pyahocorasick``
  automaton.
* LDNOOBW per-language lists (``wordlists/ldnoobw/<lang>``) in a ``pyahocorasick`` automaton per
  language, with word-boundary checks where the language separates words by spaces.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import tarfile
from pathlib import Path

import ahocorasick
import numpy as np
import xxhash

from datapipe.env import cache_dir as shared_cache_dir
from datapipe.env import shared_data

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def shared_path(p: str) -> Path:
    """A manifest path: absolute, relative to the working directory if it exists, else under ``shared_data()``."""
    path = Path(p)
    if path.is_absolute() or path.exists():
        return path
    return shared_data() / path


def cache_dir() -> Path:
    """``$DATAPIPE_CACHE`` or ``~/.cache/datapipe`` (derived, rebuildable files only)."""

    return shared_cache_dir()


def require_file(path: Path, how: str) -> Path:
    """Return ``path`` if it is a file, else raise FileNotFoundError naming it and ``how`` to get it."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: not found. {how}")
    return Path(path)


def normalize_url_text(text: str) -> str:
    """DataTrove's URL normalisation: lower case, then drop every character outside ``[a-z0-9]``."""
    return _NON_ALNUM.sub("", text.lower())


def url_words(url: str) -> set[str]:
    """The ``[a-z0-9]+`` tokens of the lower-cased URL (DataTrove splits on ``[^a-zA-Z0-9]+``)."""
    return {w for w in _NON_ALNUM.split(url.lower()) if w}


def domain_hash(domain: str | bytes) -> int:
    """xxh3-64 of a lower-cased domain (the key of the UT1 hash array)."""
    if isinstance(domain, str):
        domain = domain.lower().encode("utf-8", "surrogatepass")
    return xxhash.xxh3_64_intdigest(domain)


def _hash_domains(tar_path: Path) -> np.ndarray:
    with tarfile.open(tar_path, "r:gz") as tf:
        member = tf.extractfile("domains")
        if member is None:
            raise ValueError(f"{tar_path}: no 'domains' member")
        lines = member.read().lower().split(b"\n")
    arr = np.fromiter(map(xxhash.xxh3_64_intdigest, filter(None, lines)), dtype=np.uint64)
    arr.sort()
    # Sorted, so the duplicates are neighbours: ``np.unique`` (numpy 2.4's hash path) took 6.4 s of
    # a 10.5 s first load of the 4.56 M-domain list on the 2-core machine.
    return arr[np.concatenate(([True], arr[1:] != arr[:-1]))] if arr.size else arr


@functools.lru_cache(maxsize=4)
def load_ut1(tar_path: str) -> tuple[np.ndarray, frozenset[str]]:
    """(sorted uint64 domain hashes, set of ``host/path`` URL entries) of a UT1 tarball.

    Raises FileNotFoundError if the tarball is missing, ValueError if it lacks ``domains``.
    """
    path = require_file(Path(tar_path), "It ships with datatrove (datatrove/assets/url_filterblacklistsv0_3_0.tar.gz); "
                        "set url_blocklist.ut1_path in the manifest.")
    st = path.stat()
    key = hashlib.sha1(f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]
    cached = cache_dir() / f"ut1_domains_{key}.npy"
    arr = None
    if cached.is_file():
        try:
            arr = np.load(cached)
        except (OSError, ValueError):
            arr = None
    if arr is None:
        arr = _hash_domains(path)
        try:  # the cache is an optimisation: an unwritable cache dir is not an error
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_suffix(f".{os.getpid()}.tmp.npy")
            np.save(tmp, arr)
            os.replace(tmp, cached)
        except OSError:
            pass
    return arr, _ut1_urls(path, cached.with_name(f"ut1_urls_{key}.txt"))


def _ut1_urls(path: Path, cached: Path) -> frozenset[str]:
    """The normalised ``urls`` entries of the tarball, read from ``cached`` when it is there."""
    try:
        return frozenset(cached.read_text(encoding="utf-8").split("\n")) - {""}
    except (OSError, UnicodeDecodeError):
        pass
    with tarfile.open(path, "r:gz") as tf:
        member = tf.extractfile("urls")
        urls = frozenset(u.strip().lower().rstrip("/") for u in member.read().decode("utf-8", "replace").splitlines()
                         if u.strip()) if member else frozenset()
    try:  # written whole, then renamed: a reader never sees a part
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
        tmp.write_text("\n".join(sorted(urls)), encoding="utf-8")
        os.replace(tmp, cached)
    except OSError:
        pass
    return urls


def parent_domains(host: str) -> list[str]:
    """``host`` and each parent with >= 2 labels: ``a.b.example.com`` -> [it, ``b.example.com``, ``example.com``].

    UT1 is a squidGuard list, where a domain entry also blocks its subdomains; checking every
    parent covers DataTrove's two checks (registered domain and full host) without a PSL lookup.
    """
    labels = host.lower().strip(".").split(".")
    return [".".join(labels[i:]) for i in range(len(labels) - 1)] or [host.lower()]


def in_sorted(arr: np.ndarray, keys: list[int]) -> np.ndarray:
    """Boolean array: which ``keys`` (uint64) are in the sorted array ``arr``."""
    if not keys or len(arr) == 0:
        return np.zeros(len(keys), dtype=bool)
    k = np.asarray(keys, dtype=np.uint64)
    idx = np.minimum(np.searchsorted(arr, k), len(arr) - 1)
    return arr[idx] == k


def _read_list(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]


@functools.lru_cache(maxsize=4)
def load_url_words(folder: str) -> tuple[frozenset[str], frozenset[str], ahocorasick.Automaton | None]:
    """(banned words, soft-banned words, banned-subword automaton) from a DataTrove URL-filter folder.

    Words are normalised with :func:`normalize_url_text`, as DataTrove does.
    The automaton's values are the normalised sub-words. Raises FileNotFoundError for a missing file.
    """
    how = "The lists ship with datatrove (datatrove/assets/*.txt); set url_blocklist.words_dir."
    d = Path(folder)
    # Like DataTrove, lines starting with '#' are skipped (banned_words.txt has '#mong', '#xx').
    banned = frozenset(filter(None, map(normalize_url_text, _read_list(require_file(d / "banned_words.txt", how)))))
    soft = frozenset(filter(None, map(normalize_url_text, _read_list(require_file(d / "soft_banned_words.txt", how)))))
    subs = [normalize_url_text(w) for w in _read_list(require_file(d / "banned_subwords.txt", how))]
    auto = None
    if any(subs):
        auto = ahocorasick.Automaton()
        for w in filter(None, subs):
            auto.add_word(w, w)
        auto.make_automaton()
    return banned, soft, auto


#: Languages written without spaces between words (lid.176 codes): no word-boundary checks on
#: their own-script entries, and the word count is the count of non-space characters. Korean is
#: spaced, but particles attach to the word, so a boundary check would miss inflected forms.
UNSPACED_LANGS = frozenset({"zh", "ja", "th", "ko", "lo", "km", "my", "bo", "wuu", "yue"})
#: lid.176 codes whose LDNOOBW file has another name.
LDNOOBW_ALIASES = {"tl": "fil"}


@functools.lru_cache(maxsize=64)
def ldnoobw_automaton(folder: str, lang: str) -> ahocorasick.Automaton | None:
    """Aho-Corasick automaton of the lower-cased LDNOOBW entries for ``lang`` (None: no list)."""
    path = Path(folder) / LDNOOBW_ALIASES.get(lang, lang)
    if not path.is_file():
        return None
    auto = ahocorasick.Automaton()
    for w in _read_list(path):
        auto.add_word(w.lower(), w.lower())
    auto.make_automaton()
    return auto


def _needs_boundary(ch: str, spaced: bool) -> bool:
    return ch.isalnum() and (spaced or ch.isascii())


def find_listed_words(text: str, auto: ahocorasick.Automaton, lang: str) -> list[tuple[int, int, str]]:
    """``(start, end, entry)`` of list entries in ``text.lower()`` (offsets into the lower-cased
    text, which differ from ``text`` only where ``lower()`` changes lengths, e.g. ``İ``; may overlap).

    In spaced languages an entry must sit between non-alphanumeric characters (``ass`` does not
    match in ``class``); in :data:`UNSPACED_LANGS` only entry edges that are ASCII letters or
    digits need a boundary (so the Chinese entry ``13.`` does not match inside ``2013.``).
    """
    low = text.lower()
    spaced = lang not in UNSPACED_LANGS
    out, size = [], len(low)
    for end, word in auto.iter(low):
        start = end - len(word) + 1
        if _needs_boundary(word[0], spaced) and start > 0 and low[start - 1].isalnum():
            continue
        if _needs_boundary(word[-1], spaced) and end + 1 < size and low[end + 1].isalnum():
            continue
        out.append((start, end + 1, word))
    return out


def count_listed_words(text: str, auto: ahocorasick.Automaton, lang: str) -> int:
    """Number of matches of :func:`find_listed_words` (the ``ldnoobw_count`` signal)."""
    return len(find_listed_words(text, auto, lang))


def word_count(text: str, lang: str) -> int:
    """Whitespace words, or non-space characters for :data:`UNSPACED_LANGS` (the fraction's denominator)."""
    if lang in UNSPACED_LANGS:
        return sum(1 for c in text if not c.isspace())
    return len(text.split())
