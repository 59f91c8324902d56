"""Training and evaluating binary fastText classifiers (seeded, single-threaded).

``train_binary`` splits documents by group (a hash of the source document, so pieces of one page
never straddle the split), writes the training lines in a seeded order, trains with
``thread=1`` and a fixed ``seed``, quantises to ``.ftz`` and
evaluates on the held-out groups. It writes ``<out>`` and ``<out stem>.json`` (labels,
preprocessing, parameters, sources with sha256, metrics). The shipped models are rebuilt by
``train_quality``, ``train_toxicity`` and ``train_nsfw`` (``datapipe classifiers train
quality|toxicity|nsfw``).

Reproducibility: trained with fasttext-community 0.11.9, ``thread=1`` and ``lrUpdateRate=1``
(with the default 100 small inputs diverged), the same inputs give byte-identical ``.ftz`` files,
also for several trainings in one process and whatever the process environment. fasttext-numpy2
0.10.4, used before, read uninitialised memory while training: its weights changed with the size
of the environment and a CI machine produced two different models from one input.
"""
from __future__ import annotations

import hashlib
import json
import random
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import xxhash

from datapipe.classifiers import model as model_mod
from datapipe.classifiers.model import LABEL_PREFIX, load_classifier, preprocess

DEFAULT_PARAMS = {"lr": 0.2, "epoch": 10, "dim": 16, "wordNgrams": 2, "minCount": 2, "bucket": 200000,
                  "minn": 0, "maxn": 0, "loss": "softmax", "lrUpdateRate": 1}


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_heldout(group: str, valid_pct: int, seed: int) -> bool:
    """Stable split: ``xxh64(group, seed) % 100 < valid_pct``."""
    return xxhash.xxh64_intdigest(group.encode("utf-8", "surrogatepass"), seed) % 100 < valid_pct


def auc(scores, labels) -> float:
    """ROC AUC by the Mann-Whitney rank statistic (ties get average ranks). NaN if one class is empty."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s), dtype=np.float64)
    sorted_s = s[order]
    i = 0
    while i < len(s):  # average ranks over runs of equal scores
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def binary_metrics(scores, labels, threshold: float = 0.5) -> dict:
    """precision, recall, f1, accuracy at ``score >= threshold``, AUC, n, n_pos (floats/ints)."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=bool)
    pred = s >= threshold
    tp, fp, fn = int((pred & y).sum()), int((pred & ~y).sum()), int((~pred & y).sum())
    prec = tp / (tp + fp) if tp + fp else 0.0
    rec = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return {"precision": round(prec, 4), "recall": round(rec, 4), "f1": round(f1, 4),
            "accuracy": round(float((pred == y).mean()) if len(y) else 0.0, 4),
            "auc": round(auc(s, y), 4), "n": int(len(y)), "n_pos": int(y.sum()), "threshold": threshold}


def evaluate_model(model_path: str | Path, pos_texts: list[str], neg_texts: list[str],
                   positive_label: str | None = None, threshold: float = 0.5) -> dict:
    """Metrics of a model on labelled texts (positives first). See :func:`binary_metrics`."""
    clf = load_classifier(model_path, positive_label)
    scores = clf.score(list(pos_texts) + list(neg_texts))
    return binary_metrics(scores, [True] * len(pos_texts) + [False] * len(neg_texts), threshold)


def _fit(train_file: str, out: str, seed: int, params: dict, quantize_cutoff: int) -> None:
    import fasttext

    fasttext.FastText.eprint = lambda *a, **k: None
    model = fasttext.train_supervised(input=train_file, seed=seed, thread=1, verbose=0, **params)
    model.quantize(input=train_file, retrain=True, cutoff=quantize_cutoff, qnorm=True, thread=1, verbose=0)
    model.save_model(out)


def train_binary(pos: list[tuple[str, str]], neg: list[tuple[str, str]], out: str | Path,
                 pos_label: str, neg_label: str, params: dict | None = None, seed: int = 1,
                 valid_pct: int = 20, preprocessing: str = "datapipe-v1", max_tokens: int = 1000,
                 quantize_cutoff: int = 50000, sources: list[str] | None = None, extra_meta: dict | None = None,
                 heldout_fn: Callable[[str], bool] | None = None, split_rule: str | None = None) -> dict:
    """Train ``pos_label`` vs ``neg_label`` on ``(group, text)`` pairs; save model + sidecar; return the sidecar dict.

    ``heldout_fn(group) -> bool`` decides which groups are held out (default: :func:`is_heldout` with
    ``valid_pct``); ``split_rule`` describes it in the sidecar. Held-out metrics (``metrics``) are
    measured on the quantised model that is saved. Raises ValueError if either class has no training
    or no held-out example.
    """
    params = {**DEFAULT_PARAMS, **(params or {})}
    rows = [(g, t, pos_label) for g, t in pos] + [(g, t, neg_label) for g, t in neg]
    heldout_fn = heldout_fn or (lambda g: is_heldout(g, valid_pct, seed))
    flags = [heldout_fn(r[0]) for r in rows]
    train = [r for r, h in zip(rows, flags) if not h]
    held = [r for r, h in zip(rows, flags) if h]
    for lab in (pos_label, neg_label):
        if not any(r[2] == lab for r in train) or not any(r[2] == lab for r in held):
            raise ValueError(f"label {lab!r} needs both training and held-out examples")
    random.Random(seed).shuffle(train)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        train_file = Path(tmp) / "train.txt"
        with open(train_file, "w", encoding="utf-8") as f:
            for _, text, lab in train:
                f.write(f"{LABEL_PREFIX}{lab} {preprocess(text, preprocessing, max_tokens)}\n")
        _fit(str(train_file), str(out), seed, params, quantize_cutoff)
    meta = {
        "labels": [pos_label, neg_label], "positive_label": pos_label, "preprocessing": preprocessing,
        "max_tokens": max_tokens, "params": params, "seed": seed, "thread": 1, "valid_pct": valid_pct,
        "split_rule": split_rule or f"xxh64(group, seed) % 100 < {valid_pct} held out",
        "quantize_cutoff": quantize_cutoff, "n_train": len(train), "n_heldout": len(held),
        "n_train_pos": sum(r[2] == pos_label for r in train), "n_heldout_pos": sum(r[2] == pos_label for r in held),
        "sources": [{"spec": s, "sha256": sha256_file(s.split(":", 1)[-1] if not Path(s).is_file() else s)}
                    for s in (sources or [])],
        "fasttext": "fasttext-community==0.11.9", "bytes": out.stat().st_size,
        **(extra_meta or {}),
    }
    side = out.with_suffix(".json")
    side.write_text(json.dumps(meta, indent=1))
    # Evaluate the saved model through the same loader the stages use.

    model_mod._CACHE.clear()
    meta["metrics"] = evaluate_model(out, [t for _, t, lab in held if lab == pos_label],
                                     [t for _, t, lab in held if lab == neg_label], pos_label)
    side.write_text(json.dumps(meta, indent=1))
    return meta
