"""The multi-genre extraction set: public benchmarks with gold text, fetched, checked, typed, split.

    .venv/bin/python benchmarks/extraction_sets.py fetch [--mirror-root DIR]   # get + check by sha256
    .venv/bin/python benchmarks/extraction_sets.py check                       # check what is on disk
    .venv/bin/python benchmarks/extraction_sets.py summary                     # pages per split/type/source

The fetched files live under ``$DATAPIPE_EXTRACTION_SETS`` (default ``benchmarks/work/extraction_sets``,
not in git). ``fetch`` takes each repository at its pinned commit (a local bare mirror under
``--mirror-root`` if one is there, else ``git clone`` from GitHub), unpacks the listed paths and checks
every file against ``benchmarks/data/extraction_sets.sha256``. Two more sets come from
``../shared/data/extraction`` (trafilatura's evaluation set, the scrapinghub AEB). Sources, licences,
the page-type rule and the split rule: ``benchmarks/EXTRACTION_SETS.md``.

A page is a dict: ``source``, ``id``, ``url`` (may be None), ``site`` (registrable domain, the split
unit), ``type`` (article, forum, product, listing, documentation, mixed), ``html`` (bytes), and either
``gold`` (str: human main text, scored by word F1) or ``with``/``without`` (lists of str: trafilatura's
string test). ``split(site)`` is ``dev`` or ``test``, fixed before any tuning.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "data" / "extraction_sets.sha256"

#: repository -> (commit, paths taken). Files of these paths (minus junk) are listed in MANIFEST.
REPOS = {
    "mozilla/readability": ("ab4027a8b37669745016869a37a504727992b2ba", ["test/test-pages"]),
    "fhgr/harvest": ("f778b0a4112259ad246c8ac57e9d51eb149ab9ef", ["corpus/goldDocuments"]),
    "j-szulc/html-cleaning-dataset-merged": ("46e01a04b47051838a228bf23631430b2c9de375", [
        "CleanPortalEval-master", "cleaneval-dev", "cleaneval-final", "dragnet_data", "page-signal-master"]),
    "leogao2/htmltotext-benchmark": ("feab59949ee4f9789af8e0c2412720895278d3cf", ["benchmarkdata"]),
}

SPLIT_SALT = "datapipe-extraction-split-v1"
TEST_SHARE = 3  # of 10: about 30% of sites go to test


def sets_root() -> Path:
    return Path(os.environ.get("DATAPIPE_EXTRACTION_SETS", HERE / "work" / "extraction_sets"))


# ---------------------------------------------------------------- sites, types, split

_SECOND_LEVEL = {"co", "com", "org", "net", "ac", "gov", "edu", "or", "ne", "go"}


def site_of(url: str | None) -> str | None:
    """Registrable domain of ``url`` (``news.bbc.co.uk`` -> ``bbc.co.uk``); None without a host."""
    if not url:
        return None
    try:
        host = (urlsplit(url if "//" in url else "//" + url).hostname or "").lower().strip(".")
    except ValueError:  # malformed (e.g. "Invalid IPv6 URL")
        return None
    if not host or "." not in host:
        return None
    labels = host.split(".")
    if len(labels) >= 3 and len(labels[-1]) == 2 and labels[-2] in _SECOND_LEVEL:
        return ".".join(labels[-3:])
    return ".".join(labels[-2:])


_CANON = re.compile(rb"""<link[^>]+rel=["']?canonical["']?[^>]*href=["']([^"']+)|"""
                    rb"""<link[^>]+href=["']([^"']+)["'][^>]*rel=["']?canonical|"""
                    rb"""property=["']og:url["'][^>]*content=["']([^"']+)""", re.I)
_ABS = re.compile(rb"""(?:href|src)=["']?(https?://[^"'\s>/]+)""", re.I)


def url_in_html(html: bytes) -> str | None:
    """The page's own URL from canonical / og:url, else the most frequent absolute link host."""
    m = _CANON.search(html[:200_000])
    if m:
        return next(g for g in m.groups() if g).decode("latin-1")
    hosts = Counter(site_of(h.decode("latin-1")) for h in _ABS.findall(html[:500_000]))
    hosts.pop(None, None)
    for junk in ("w3.org", "google.com", "googleapis.com", "facebook.com", "twitter.com", "doubleclick.net"):
        hosts.pop(junk, None)
    return "http://" + hosts.most_common(1)[0][0] if hosts else None


# Page-type rule for sources without types (documented in EXTRACTION_SETS.md), on the URL path.
_TYPE_RULES = [
    ("forum", re.compile(r"forum|thread|viewtopic|showthread|/topic|/t/|discussion|community\.|bbs\.|/questions/")),
    ("documentation", re.compile(r"/docs?/|documentation|/manual|/reference/|/api/|readthedocs|wiki")),
    ("product", re.compile(r"/products?/|/item/|/dp/|/shop/.+|/p/\d|artikel|produkt")),
    ("listing", re.compile(r"/(category|categories|tag|tags|archive|search|list|kategorie)(/|$|\?)|/page/\d")),
]


def type_from_url(url: str | None, default: str) -> str:
    u = (url or "").lower()
    for name, rx in _TYPE_RULES:
        if rx.search(u):
            return name
    return default


def split(site: str) -> str:
    """``test`` for about 30% of sites (salted sha256 of the site), else ``dev``."""
    h = int(hashlib.sha256(f"{SPLIT_SALT}:{site}".encode()).hexdigest()[:8], 16)
    return "test" if h % 10 < TEST_SHARE else "dev"


# ---------------------------------------------------------------- gold-text helpers

def html_text(fragment: bytes | str) -> str:
    """Visible text of a gold HTML fragment (lxml ``text_content``), for gold given as HTML."""
    import lxml.html

    if isinstance(fragment, bytes):
        fragment = fragment.decode("utf-8", "replace")
    if not fragment.strip():
        return ""
    doc = lxml.html.fromstring(fragment)
    for bad in doc.xpath("//script|//style"):
        bad.drop_tree()
    return doc.text_content()


#: Dragnet's gold files put the page's comments after this line ("content" vs "content and
#: comments" are its two evaluation targets); the main text is the part before it.
DRAGNET_COMMENTS = "!@#$%^&*()  COMMENTS"


def dragnet_gold(text: str) -> str:
    """A Dragnet gold file's main text: what comes before the comments separator (all of it if none)."""
    return text.split(DRAGNET_COMMENTS, 1)[0]


_CLEANEVAL_TAG = re.compile(r"^\s*<(p|h|l)>", re.M)


def cleaneval_gold(text: str) -> str:
    lines = text.splitlines()
    if lines and lines[0].startswith("URL:"):
        lines = lines[1:]
    return _CLEANEVAL_TAG.sub("", "\n".join(lines))


def _l3s_gold(html: bytes) -> str:
    """L3S-GN1: main content = the spans marked headline / full text / supplemental (x-nc-sel1..3)."""
    import lxml.html

    doc = lxml.html.fromstring(html.decode("utf-8", "replace"))
    parts = doc.xpath('//*[contains(concat(" ", @class, " "), " x-nc-sel1 ") or '
                      'contains(concat(" ", @class, " "), " x-nc-sel2 ") or '
                      'contains(concat(" ", @class, " "), " x-nc-sel3 ")]')
    return "\n".join(p.text_content() for p in parts)


# ---------------------------------------------------------------- loaders

def _read(root: Path, rel: str, sums: dict[str, str]) -> bytes:
    data = (root / rel).read_bytes()
    want = sums.get(rel)
    if want is None:
        raise ValueError(f"{rel}: not in {MANIFEST.name}")
    if hashlib.sha256(data).hexdigest() != want:
        raise ValueError(f"{rel}: sha256 differs from {MANIFEST.name} (damaged or another version)")
    return data


def _page(source, pid, url, typ, html, gold=None, with_=None, without=None, site=None):
    site = site or site_of(url) or site_of(url_in_html(html)) or f"{source}:{pid}"
    return {"source": source, "id": pid, "url": url, "site": site, "type": typ, "html": html,
            "gold": gold, "with": with_, "without": without, "split": split(site)}


def load_fetched(root: Path | None = None) -> list[dict]:
    """Pages of the fetched repositories; every file read is checked against MANIFEST."""
    root = root or sets_root()
    sums = read_manifest()
    pages = []
    rd = "mozilla+readability/test/test-pages"
    for d in sorted({r.split("/")[3] for r in sums if r.startswith(rd + "/")}):
        src = _read(root, f"{rd}/{d}/source.html", sums)
        gold = html_text(_read(root, f"{rd}/{d}/expected.html", sums))
        site = re.sub(r"-\d+$", "", d)  # folders are named by site: bbc-1, nytimes-2, ...
        pages.append(_page("readability", d, url_in_html(src), "article", src, gold, site=site_of(url_in_html(src)) or site))
    hv = "fhgr+harvest/corpus/goldDocuments/"
    for rel in sorted(r for r in sums if r.startswith(hv)):
        doc = json.loads(_read(root, rel, sums))
        gold = "\n".join(p["post_text"]["surface_form"] for p in doc["gold_standard_annotation"])
        pages.append(_page("harvest", Path(rel).stem, doc["url"], "forum", doc["html"].encode("utf-8"), gold))
    js = "j-szulc+html-cleaning-dataset-merged/"
    for sub, source in (("CleanPortalEval-master", "cleanportaleval"), ("cleaneval-dev", "cleaneval"),
                        ("cleaneval-final", "cleaneval"), ("dragnet_data", "dragnet"), ("page-signal-master", "l3s_gn1")):
        for rel in sorted(r for r in sums if r.startswith(f"{js}{sub}/GoldStandard/")):
            stem = Path(rel).stem
            hrel = f"{js}{sub}/input/{stem}.html"
            if hrel not in sums:
                continue
            html, g = _read(root, hrel, sums), _read(root, rel, sums)
            if source == "l3s_gn1":
                url, gold, typ = url_in_html(html), _l3s_gold(g), "article"
            elif source in ("cleaneval", "cleanportaleval"):
                text = g.decode("utf-8", "replace")
                url = text.splitlines()[0][4:].strip() if text.startswith("URL:") else None
                gold = cleaneval_gold(text)
                typ = "article" if source == "cleanportaleval" else type_from_url(url, "mixed")
            else:  # dragnet: main content only, not the comments after its separator line
                url, typ = url_in_html(html), "article"
                gold = dragnet_gold(g.decode("utf-8", "replace"))
            pages.append(_page(source, f"{sub}/{stem}", url, typ, html, gold))
    lg = "leogao2+htmltotext-benchmark/benchmarkdata/"
    kinds = {"forum": "forum", "news": "article", "blog": "article", "tech": "article", "wiki": "documentation"}
    for rel in sorted(r for r in sums if r.startswith(lg) and "/html/" in r):
        trel = rel.replace("/html/", "/text/")[:-5] + ".txt"
        if trel not in sums:
            continue
        name = Path(rel).stem
        html, gold = _read(root, rel, sums), _read(root, trel, sums).decode("utf-8", "replace")
        url = url_in_html(html)
        pages.append(_page("htmltotext", name, url, kinds.get(name.split("-")[0], "article"), html, gold,
                           site=site_of(url) or name.split("-")[1]))
    return [p for p in pages if p["gold"] and p["gold"].split()]


def load_shared(data: Path) -> list[dict]:
    """trafilatura's evaluation set (string test, typed by URL rule) and the AEB (articles, gold text)."""
    meta = None
    blobs = {}
    with tarfile.open(data / "trafilatura_eval.tar.xz", "r:xz") as tf:
        for m in tf:
            if m.isfile():
                p = Path(m.name)
                if p.name == "evaldata.json":
                    meta = json.load(tf.extractfile(m))
                elif p.parent.name in ("eval", "cache"):
                    blobs.setdefault(p.name, tf.extractfile(m).read())
    pages = [_page("trafilatura_eval", e["file"], url, type_from_url(url, "article"), blobs[e["file"]],
                   with_=e.get("with", []), without=e.get("without", []))
             for url, e in meta.items() if e["file"] in blobs]
    root = data / "scrapinghub_aeb"
    truth = json.loads((root / "ground-truth.json").read_text(encoding="utf-8"))
    for key, item in sorted(truth.items()):
        html = gzip.decompress((root / "html" / f"{key}.html.gz").read_bytes())
        pages.append(_page("aeb", key, item.get("url"), "article", html, item.get("articleBody") or ""))
    return pages


def load_all(data: Path) -> tuple[list[dict], list[str]]:
    """Every page available here, and notes on what is missing (fetched sets absent: skipped, said)."""
    notes = []
    pages = load_shared(data)
    root = sets_root()
    if all((root / r.replace("/", "+")).is_dir() for r in REPOS):
        pages += load_fetched(root)
    else:
        notes.append(f"fetched extraction sets absent under {root}: only the shared sets are scored "
                     "(get them: python benchmarks/extraction_sets.py fetch)")
    return pages, notes


# ---------------------------------------------------------------- fetch / check

def read_manifest() -> dict[str, str]:
    out = {}
    for line in MANIFEST.read_text().splitlines():
        if line.strip():
            digest, rel = line.split("  ", 1)
            out[rel] = digest
    return out


def _git_dir(repo: str, mirror_root: Path | None, tmp: Path) -> Path:
    if mirror_root is not None:
        cand = mirror_root / repo.replace("/", "+") / "repo"
        if cand.is_dir():
            return cand
    dest = tmp / repo.replace("/", "+")
    subprocess.run(["git", "clone", "--bare", "--quiet", f"https://github.com/{repo}.git", str(dest)], check=True)
    return dest


def _junk(name: str) -> bool:
    return name.endswith(".DS_Store") or "/." in name


def fetch(mirror_root: Path | None, write_manifest: bool = False) -> None:
    root = sets_root()
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for repo, (commit, paths) in REPOS.items():
            git = _git_dir(repo, mirror_root, Path(tmp))
            tar = subprocess.run(["git", f"--git-dir={git}", "archive", "--format=tar", commit, "--", *paths],
                                 check=True, capture_output=True).stdout
            dest = root / repo.replace("/", "+")
            with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
                for m in tf:
                    if m.isfile() and not _junk(m.name):
                        data = tf.extractfile(m).read()
                        out = dest / m.name
                        out.parent.mkdir(parents=True, exist_ok=True)
                        out.write_bytes(data)
                        lines.append(f"{hashlib.sha256(data).hexdigest()}  {repo.replace('/', '+')}/{m.name}")
            print(f"[extraction_sets] {repo}@{commit[:10]}: {len(tar) >> 20} MiB -> {dest}", file=sys.stderr)
    if write_manifest:
        MANIFEST.write_text("\n".join(sorted(lines, key=lambda s: s[66:])) + "\n")
    check()


def check() -> None:
    root, bad, sums = sets_root(), [], read_manifest()
    for rel, digest in sums.items():
        p = root / rel
        if not p.is_file() or hashlib.sha256(p.read_bytes()).hexdigest() != digest:
            bad.append(rel)
    if bad:
        raise SystemExit(f"{len(bad)} of {len(sums)} files missing or differing under {root}, e.g. {bad[:3]}")
    print(f"[extraction_sets] {len(sums)} files checked (sha256) under {root}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fetch", help="get the pinned repositories and check every file by sha256")
    f.add_argument("--mirror-root", type=Path, default=None, help="folder of bare mirrors (owner+name/repo)")
    f.add_argument("--write-manifest", action="store_true", help=argparse.SUPPRESS)
    sub.add_parser("check", help="check the fetched files against the manifest")
    sub.add_parser("summary", help="pages per split, type and source")
    a = ap.parse_args()
    if a.cmd == "fetch":
        fetch(a.mirror_root, a.write_manifest)
    elif a.cmd == "check":
        check()
    else:
        sys.path.insert(0, str(HERE.parent))
        from datapipe.env import shared_data

        pages, notes = load_all(shared_data() / "extraction")
        c = Counter((p["split"], p["type"], p["source"]) for p in pages)
        for k in sorted(c):
            print(*k, c[k], sep="\t")
        sites = {s: {p["split"] for p in pages if p["site"] == s} for s in {p["site"] for p in pages}}
        print("sites", len(sites), "in both splits:", sum(len(v) > 1 for v in sites.values()), *notes, sep="\t")


if __name__ == "__main__":
    main()
