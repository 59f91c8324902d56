"""Benchmark test items as texts: the readers behind ``datapipe decontam index``.

An item is what a page would copy: the fields named per benchmark in ``evalsets/README.md`` (its
"item text" column), joined by newlines. Multiple-choice items give one text with every choice and
one text per choice after the question (a page may show all choices or only the answer), so the
n-grams across the question/choice boundary are in the index either way. Per benchmark:

* GSM8K ``question`` + ``answer``, the answer also without its ``<<48/2=24>>`` calculator notes
  (pages show the solution without them);
* HumanEval ``prompt`` + ``canonical_solution`` + ``test``; MBPP ``prompt`` + ``code`` + ``test_list``;
* HellaSwag ``ctx`` (also without its ``activity label:`` prefix) + ``endings``;
* PIQA ``goal`` + ``sol1``/``sol2``; MMLU ``question`` + ``choices``; ARC, OpenBookQA ``query`` +
  ``choices``; CommonsenseQA ``question.stem`` + the choices' ``text``;
* WinoGrande each of ``context_options`` + ``continuation`` (the two filled-in sentences);
* BoolQ ``query`` (passage and question); LAMBADA ``context`` + ``continuation``;
  TriviaQA ``context`` (the question) + ``answer``;
* WikiText-2 test (``quality/wikitext-2_test.txt.gz``, the ablation's held-out texts): each
  paragraph line, its tokenisation undone where it splits words (``do n't``), cut at ``<unk>``
  (a word the original has and the file does not): the pieces match by their n-grams only.

The llm-foundry prefixes (``Question:``, ``Passage:``, ``Answer:``) need no special case: the
normaliser drops labels on both sides (:mod:`decontam_text`).
"""
from __future__ import annotations

import gzip
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Item:
    """One test item: ``texts`` are its surface variants; ``whole`` lets a variant shorter than
    n words match as a whole (False for fragments such as WikiText pieces between ``<unk>``)."""

    benchmark: str
    item_id: str
    texts: list[str]
    whole: bool = True


def _read_jsonl(path: Path) -> list[dict]:
    raw = path.read_bytes()
    body = gzip.decompress(raw) if path.suffix == ".gz" else raw
    return [json.loads(line) for line in body.decode("utf-8").split("\n") if line.strip()]


def _choices(head: str, options: list[str], tail: str = "") -> list[str]:
    """Question with all choices, and the question with each choice alone."""
    opts = [str(o) for o in options if str(o).strip()]
    out = ["\n".join([head, *opts, tail]).strip()]
    out += [f"{head}\n{o}\n{tail}".strip() for o in opts]
    return out


_CALC = re.compile(r"<<[^<>]*>>")


def _gsm8k(r):
    return [r["question"] + "\n" + r["answer"], r["question"] + "\n" + _CALC.sub("", r["answer"])]


def _hellaswag(r):
    ctx = r["ctx"]
    plain = ctx.split(": ", 1)[1] if ": " in ctx else ctx
    return _choices(ctx, r["endings"]) + _choices(plain, r["endings"])


#: benchmark -> (file under evalsets/, id field or None for the line number, texts of one record)
BENCHMARKS = {
    "gsm8k": ("gsm8k/test.jsonl", None, _gsm8k),
    "humaneval": ("humaneval/HumanEval.jsonl", "task_id",
                  lambda r: [r["prompt"] + r["canonical_solution"] + "\n" + r["test"]]),
    "mbpp": ("mbpp/sanitized-mbpp-test.jsonl", "task_id",
             lambda r: ["\n".join([r["prompt"], r["code"], *r["test_list"]])]),
    "hellaswag": ("hellaswag/validation.jsonl.gz", "ind", _hellaswag),
    "piqa": ("piqa/valid.jsonl", None, lambda r: _choices(r["goal"], [r["sol1"], r["sol2"]])),
    "mmlu": ("mmlu/test.jsonl.gz", None, lambda r: _choices(r["question"], r["choices"])),
    "arc_easy": ("arc_easy/test.jsonl", None, lambda r: _choices(r["query"], r["choices"])),
    "arc_challenge": ("arc_challenge/test.jsonl", None, lambda r: _choices(r["query"], r["choices"])),
    "openbookqa": ("openbookqa/test.jsonl", None, lambda r: _choices(r["query"], r["choices"])),
    "commonsenseqa": ("commonsenseqa/dev_rand_split.jsonl", "id",
                      lambda r: _choices(r["question"]["stem"], [c["text"] for c in r["question"]["choices"]])),
    "winogrande": ("winogrande/dev.jsonl", None,
                   lambda r: [o + " " + r["continuation"] for o in r["context_options"]]),
    "boolq": ("boolq/dev.jsonl.gz", None, lambda r: [r["query"]]),
    "lambada": ("lambada/test.jsonl", None, lambda r: [r["context"] + " " + r["continuation"]]),
    "triviaqa": ("triviaqa/triviaqa_sm_sub.jsonl", None, lambda r: [r["context"] + " " + r["answer"]]),
}
WIKITEXT = "quality/wikitext-2_test.txt.gz"


def evalset_items(root: Path, names: list[str] | None = None) -> list[Item]:
    """Items of the benchmarks under ``root`` (an ``evalsets/`` folder), in BENCHMARKS order.
    Raises FileNotFoundError naming a missing file, ValueError for an unknown name."""
    unknown = sorted(set(names or []) - set(BENCHMARKS))
    if unknown:
        raise ValueError(f"unknown benchmark(s) {unknown}; known: {', '.join(BENCHMARKS)}")
    out = []
    for name, (rel, id_field, texts) in BENCHMARKS.items():
        if names and name not in names:
            continue
        path = root / rel
        if not path.is_file():
            raise FileNotFoundError(f"{path}: benchmark file not found (evalsets/README.md lists them)")
        for i, r in enumerate(_read_jsonl(path)):
            out.append(Item(name, str(r[id_field]) if id_field else str(i), texts(r)))
    return out


def wikitext_items(path: Path, name: str = "wikitext2") -> list[Item]:
    """Paragraph lines of a WikiText file (headings ``= ... =`` skipped); item id = line number."""
    raw = path.read_bytes()
    body = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8")
    out = []
    for i, line in enumerate(body.split("\n")):
        s = line.strip()
        if not s or s.startswith("= "):
            continue
        out.append(Item(name, str(i + 1), wikitext_pieces(s), whole=False))
    return out


def wikitext_pieces(line: str) -> list[str]:
    """A WikiText line as the original text reads: its tokenisation undone where it splits words
    (``do n't``, ``@-@``, ``@,@``, ``@.@``), cut at ``<unk>`` (a word the file lost)."""
    s = line.replace(" n't", "n't").replace(" @-@ ", "-").replace(" @,@ ", ",").replace(" @.@ ", ".")
    return [p for p in s.split("<unk>") if p.strip()]


def _field(record: dict, path: str):
    v = record
    for key in path.split("."):
        if isinstance(v, list):
            v = [x.get(key) if isinstance(x, dict) else None for x in v]
        else:
            v = v.get(key) if isinstance(v, dict) else None
    return v


def _flat(v) -> list[str]:
    if v is None:
        return []
    if isinstance(v, list):
        return [s for x in v for s in _flat(x)]
    return [str(v)]


def jsonl_items(path: Path, fields: list[str], name: str, id_field: str | None = None) -> list[Item]:
    """Items of a user's JSONL file (``.gz`` read through gzip): the values of ``fields`` (dotted
    paths into nested objects; lists are flattened) joined by newlines; id = ``id_field`` or the
    line number. Raises FileNotFoundError, or ValueError naming the line without any field."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: JSONL file not found")
    out = []
    for i, r in enumerate(_read_jsonl(Path(path))):
        parts = [s for f in fields for s in _flat(_field(r, f))]
        if not parts:
            raise ValueError(f"{path}:{i + 1}: none of the fields {', '.join(fields)} is present")
        out.append(Item(name, str(r.get(id_field, i)) if id_field else str(i), ["\n".join(parts)]))
    return out


def sources_fingerprint(files: list[Path], settings: dict) -> str:
    """sha256 over the bytes of ``files`` (in order, with their names) and ``settings``: equal
    sources and settings -> an equal index, so ``--if-changed`` may keep the existing one."""
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    for f in files:
        h.update(str(Path(f).name).encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()
