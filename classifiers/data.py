"""Training text for the classifiers, read from files on disk.

Every reader yields ``(group, text)`` pairs: ``group`` names the source document (article,
page, line), so that a train/held-out split never puts pieces of one document on both sides.

Source kinds (``read_source`` picks one from the file name unless ``kind:`` is prefixed):

* ``wikitext``: WikiText-2 token files (``= Title =`` headings, `` @-@ `` joiners, ``<unk>``):
  articles are de-tokenised, ``<unk>`` dropped, and cut into chunks of ~``chunk_words`` words.
* ``warc`` / ``warc-main`` / ``warc-boilerplate``: WARC(.gz) responses, text extracted with
  resiliparse (whole page / main content / whole-page lines that are not main content),
  optionally kept only if lid.176 says the language is one of ``langs``.
* ``warc-dev`` / ``warc-test``: whole pages as ``warc``, only those whose URL falls in that half of
  :func:`page_split` (the development/test split the safety and PII sets share).
* ``ut1-titles``: the ``urls`` member of the UT1 adult block list tarball (FineWeb's URL filter):
  each path segment of 4 or more words (``/video/123/busty-blonde-...``) is one text, its host the
  group. Those slugs are titles of adult pages: the NSFW model's positives.
* ``aeb``: the Scrapinghub article-extraction benchmark ``ground-truth.json`` (article bodies).
* ``jsonl``: JSON lines with a ``text`` field (``id`` as group when present); ``.gz`` or ``.zst``
  (the pipeline's ``dolma/*.jsonl.zst`` export).
* ``parquet``: Parquet files with a ``text`` column (``id`` as group when present): the pipeline's
  own ``documents/``, ``rejected/`` or ``_filtered/`` shards. A directory stands for its
  ``*.parquet`` files (a run directory: those of ``documents/``), see :func:`expand_sources`.
* ``lines``: one document per non-empty line.

A file that cannot be read as its kind (not UTF-8, not JSON, not Parquet, no ``text`` column)
raises :class:`SourceError` naming the file, the kind and how to choose another.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path

from datapipe.env import shared_data

_WT_HEADING = re.compile(r"^ ?= [^=].* = ?$")
_WT_JOINERS = [(" @-@ ", "-"), (" @,@ ", ","), (" @.@ ", ".")]
_WT_SPACE_BEFORE = re.compile(r" ([,.;:!?)\]'](?:\s|$))")
_SENT_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_SLUG_SPLIT = re.compile(r"[-_+.,%=&?;:~!]+|\s+")
KINDS = ("wikitext", "warc", "warc-main", "warc-boilerplate", "warc-dev", "warc-test", "aeb", "ut1-titles",
         "jsonl", "parquet", "lines")


class SourceError(ValueError):
    """A training source that exists but cannot be read as the kind it was taken for."""


def page_split(url: str) -> str:
    """``dev`` or ``test`` for a page URL: first hex digit of sha1(url) in 0-7 is ``dev`` (half each).

    The rule of the PII span set (``benchmarks/pii_candidates.py``), so one page is on the same side
    in every evaluation set built from ``realpages``; training recipes read only ``dev`` pages.
    """
    return "dev" if hashlib.sha1(url.encode("utf-8")).hexdigest()[0] in "01234567" else "test"


def _open_text(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    if path.suffix == ".zst":
        import io

        import zstandard

        return io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), closefd=True),
                                encoding="utf-8")
    return open(path, encoding="utf-8")


def chunk_words(text: str, size: int) -> list[str]:
    """Cut ``text`` at line ends into pieces of at least ``size`` whitespace words (the last may be shorter)."""
    out, cur, n = [], [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        cur.append(line)
        n += len(line.split())
        if n >= size:
            out.append("\n".join(cur))
            cur, n = [], 0
    if cur:
        out.append("\n".join(cur))
    return out


def detokenize_wikitext(line: str) -> str:
    """Undo WikiText's tokenisation on one line: joiners, ``<unk>``, spaces before punctuation."""
    s = line.replace("<unk>", " ")
    for a, b in _WT_JOINERS:
        s = s.replace(a, b)
    s = _WT_SPACE_BEFORE.sub(r"\1", s)
    s = s.replace("( ", "(").replace(" n't", "n't").replace(" 's", "'s")
    return re.sub(r" {2,}", " ", s).strip()


def wikitext_docs(path: Path, chunk: int = 200) -> Iterator[tuple[str, str]]:
    """``(file:article_no, chunk)`` for each ~``chunk``-word piece of each WikiText article."""
    article, paras, name = -1, [], Path(path).name
    with _open_text(Path(path)) as f:
        for line in f:
            if _WT_HEADING.match(line.rstrip("\n")):
                if paras:
                    for piece in chunk_words("\n".join(paras), chunk):
                        yield f"{name}:{article}", piece
                article, paras = article + 1, []
                continue
            if line.strip() and not line.strip().startswith("="):
                paras.append(detokenize_wikitext(line))
    if paras:
        for piece in chunk_words("\n".join(paras), chunk):
            yield f"{name}:{article}", piece


def warc_docs(path: Path, langs: set[str] | None = None, chunk: int = 200, part: str = "full",
              lid_path: Path | None = None, split: str | None = None) -> Iterator[tuple[str, str]]:
    """``(url, chunk)`` of the text of each HTTP response in a WARC file, extracted with resiliparse.

    ``part``: ``full`` (whole page), ``main`` (``main_content=True``) or ``boilerplate`` (lines of
    the whole page that are not lines of the main content: menus, footers, link lists).
    ``split``: ``dev`` / ``test`` keeps only the pages of that half (:func:`page_split`).
    """
    from fastwarc.warc import ArchiveIterator, WarcRecordType
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding

    lid = None
    if langs:
        import fasttext

        lid = fasttext.load_model(str(lid_path or shared_data() / "langid" / "lid.176.ftz"))
    for rec in ArchiveIterator(str(path), record_types=WarcRecordType.response):
        url = rec.headers.get("WARC-Target-URI") or str(rec.record_id)
        if split and page_split(url) != split:
            continue
        body = rec.reader.read()
        html = bytes_to_str(body, detect_encoding(body))
        text = extract_plain_text(html, main_content=part == "main")
        if lid is not None:
            (label,), _ = lid.predict(" ".join(text.split())[:2000])
            if label.removeprefix("__label__") not in langs:
                continue
        if part == "boilerplate":
            main = {ln.strip() for ln in extract_plain_text(html, main_content=True).splitlines()}
            text = "\n".join(ln for ln in text.splitlines() if ln.strip() and ln.strip() not in main)
        if len(text.split()) < 20:
            continue
        for piece in chunk_words(text, chunk):
            if len(piece.split()) >= 20:
                yield url, piece


def aeb_docs(path: Path, chunk: int = 200) -> Iterator[tuple[str, str]]:
    """``(page id, chunk)`` of the hand-checked article bodies of the Scrapinghub AEB ground truth."""
    with _open_text(Path(path)) as f:
        truth = json.load(f)
    for key, rec in sorted(truth.items()):
        for piece in chunk_words(rec.get("articleBody") or "", chunk):
            if len(piece.split()) >= 20:
                yield f"aeb:{key}", piece


def ut1_titles(path: Path, min_words: int = 4) -> Iterator[tuple[str, str]]:
    """``(host, title)`` for each distinct URL-path slug of >= ``min_words`` alphabetic words in the
    UT1 ``urls`` list (tarball member ``urls``, one ``host/path`` a line); 70% of a slug's tokens
    must be alphabetic (drops ids and hashes)."""
    with tarfile.open(path, "r:gz") as tf:
        member = tf.extractfile("urls")
        if member is None:
            raise FileNotFoundError(f"{path}: no 'urls' member")
        lines = member.read().decode("utf-8", "replace").splitlines()
    seen: set[str] = set()
    for line in lines:
        host, _, rest = line.strip().partition("/")
        for seg in rest.split("/"):
            toks = [t for t in _SLUG_SPLIT.split(seg.lower()) if t]
            words = [t for t in toks if t.isalpha()]
            if len(words) < min_words or len(words) < 0.7 * len(toks):
                continue
            title = " ".join(words)
            if title not in seen:
                seen.add(title)
                yield host, title


def jsonl_docs(path: Path, chunk: int = 200) -> Iterator[tuple[str, str]]:
    """``(id, chunk)`` for each JSON line's ``text``."""
    with _open_text(Path(path)) as f:
        for i, line in enumerate(f):
            d = json.loads(line)
            for piece in chunk_words(d.get("text") or "", chunk):
                yield str(d.get("id", f"{path}:{i}")), piece


def parquet_docs(path: Path, chunk: int = 200) -> Iterator[tuple[str, str]]:
    """``(id, chunk)`` for each row's ``text`` of a Parquet file (group ``file:row`` without ``id``)."""
    import pyarrow.parquet as pq

    f = pq.ParquetFile(path)
    names = f.schema_arrow.names
    if "text" not in names:
        raise SourceError(f"{path}: no 'text' column (columns: {', '.join(names)})")
    cols = ["text"] + (["id"] if "id" in names else [])
    row = 0
    for batch in f.iter_batches(batch_size=1024, columns=cols):
        ids = batch.column("id").to_pylist() if "id" in cols else [None] * batch.num_rows
        for i, text in zip(ids, batch.column("text").to_pylist()):
            for piece in chunk_words(text or "", chunk):
                yield str(i) if i is not None else f"{path.name}:{row}", piece
            row += 1


def expand_sources(specs: list[str]) -> list[str]:
    """Each ``[kind:]path`` spec, a directory replaced by its Parquet files in name order: a run
    directory (it holds ``documents/``) by ``documents/*.parquet``, any other by ``*.parquet``.
    Raises SourceError for a directory without Parquet files."""
    out = []
    for spec in specs:
        path = source_kind(spec)[1]
        if not path.is_dir():
            out.append(spec)
            continue
        folder = path / "documents" if (path / "documents").is_dir() else path
        files = sorted(folder.glob("*.parquet"))
        if not files:
            raise SourceError(f"{path}: a directory without *.parquet files (give files, or a run directory)")
        out += [f"parquet:{f}" for f in files]
    return out


def lines_docs(path: Path) -> Iterator[tuple[str, str]]:
    """``(file:line_no, line)`` for each non-empty line."""
    with _open_text(Path(path)) as f:
        for i, line in enumerate(f):
            if line.strip():
                yield f"{Path(path).name}:{i}", line.strip()


def source_kind(spec: str) -> tuple[str, Path]:
    """``"kind:path"`` or a bare path whose kind is guessed from its name; returns (kind, path)."""
    head, sep, tail = spec.partition(":")
    if sep and head in KINDS:
        return head, Path(tail)
    p = Path(spec)
    n = p.name.lower()
    if ".warc" in n:
        return "warc", p
    if n == "ground-truth.json":
        return "aeb", p
    if ".jsonl" in n:
        return "jsonl", p
    if n.endswith(".parquet") or p.is_dir():
        return "parquet", p
    if "wikitext" in n:
        return "wikitext", p
    return "lines", p


def read_source(spec: str, langs: set[str] | None = None, chunk: int = 200) -> list[tuple[str, str]]:
    """All ``(group, text)`` pairs of one source spec. Raises FileNotFoundError if the file is
    missing, SourceError if it cannot be read as its kind."""
    kind, path = source_kind(spec)
    if path.is_dir():
        return [d for s in expand_sources([spec]) for d in read_source(s, langs, chunk)]
    if not path.is_file():
        raise FileNotFoundError(f"training source {path} not found")
    try:
        return list(_docs(kind, path, langs, chunk))
    except (SourceError, FileNotFoundError):  # FileNotFoundError: a model or list the reader needs
        raise
    except (UnicodeDecodeError, ValueError, OSError, EOFError, tarfile.TarError, KeyError) as e:
        # json/pyarrow/zstd errors are ValueError or OSError subclasses
        other = "parquet" if kind != "parquet" else "lines"
        raise SourceError(f"cannot read {path} as a {kind} source ({type(e).__name__}: {e}); prefix the kind "
                          f"to choose another, e.g. {other}:{path} (kinds: {', '.join(KINDS)})") from e


def _docs(kind: str, path: Path, langs, chunk: int):
    if kind == "wikitext":
        return wikitext_docs(path, chunk)
    if kind in ("warc-dev", "warc-test"):
        return warc_docs(path, langs, chunk, "full", split=kind.partition("-")[2])
    if kind.startswith("warc"):
        return warc_docs(path, langs, chunk, kind.partition("-")[2] or "full")
    if kind == "ut1-titles":
        return ut1_titles(path)
    if kind == "aeb":
        return aeb_docs(path, chunk)
    if kind == "jsonl":
        return jsonl_docs(path, chunk)
    if kind == "parquet":
        return parquet_docs(path, chunk)
    return lines_docs(path)


def sentences(text: str, min_words: int = 4) -> list[str]:
    """Sentences/lines of ``text`` (split after ``.!?`` and at newlines) with >= ``min_words`` words."""
    return [s.strip() for s in _SENT_SPLIT.split(text) if len(s.split()) >= min_words]
