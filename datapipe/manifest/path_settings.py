"""Settings that name a file or a folder to read: how they are marked, found and checked.

A stage's or a phase section's setting typed with one of the aliases below (``ModelFile``,
``SharedFile``, ``SharedDir``, ``ReadFile``, ``ReadDir``) names something the run reads. The
mark is what lets the manifest resolve such a setting against the manifest's own folder
(:func:`rebase`) and lets the tests walk every one of them with a missing file.

Lookup of a relative value, in order: the manifest's folder (done at load: the value becomes
that absolute path when something is there); then the setting's own places, named by its
``PathSetting.lookup`` (``$DATAPIPE_MODELS`` and ``classifiers/models/`` for models,
``$DATAPIPE_SHARED_DATA`` for word and block lists). Inputs (``inputs.paths``) always resolve
against the manifest's folder. ``output`` and command-line paths (``--input``, ``--output``)
are the user's: they resolve against the working directory.
"""
from __future__ import annotations

import os
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel

from datapipe.phase import section_classes
from datapipe.stage import registry


@dataclass(frozen=True)
class PathSetting:
    """The mark of a setting that names a file or folder: ``kind`` is ``file`` or ``folder``;
    ``lookup`` says where a relative value is looked for after the manifest's folder."""

    kind: str
    lookup: str = ""


ModelFile = Annotated[str, PathSetting("file", "$DATAPIPE_MODELS, then classifiers/models/")]
SharedFile = Annotated[str, PathSetting("file", "$DATAPIPE_SHARED_DATA")]
SharedDir = Annotated[str, PathSetting("folder", "$DATAPIPE_SHARED_DATA")]
ReadFile = Annotated[str, PathSetting("file")]
ReadDir = Annotated[str, PathSetting("folder")]
#: ``tokenize.tokenizer``: a known name (r50k_base, cl100k_base, gpt2_bpe) or a path.
TokenizerName = Annotated[str, PathSetting("file", "a known tokenizer name")]


def _mark(tp) -> PathSetting | None:
    """The PathSetting inside an annotation (``Optional``, ``list[...]`` and unions included)."""
    if typing.get_origin(tp) is Annotated:
        for m in tp.__metadata__:
            if isinstance(m, PathSetting):
                return m
    for arg in typing.get_args(tp):
        found = _mark(arg)
        if found is not None:
            return found
    return None


def path_fields(model: type[BaseModel], prefix: tuple = ()) -> list[tuple[tuple, PathSetting, bool]]:
    """``(key path, mark, is_list)`` of every marked field of ``model``, nested models included."""
    out = []
    for name, info in model.model_fields.items():
        ann = info.annotation
        mark = _mark(ann)
        if mark is None:
            for f in info.metadata:
                if isinstance(f, PathSetting):
                    mark = f
        if mark is not None:
            out.append((prefix + (name,), mark, typing.get_origin(ann) is list or "list[" in str(ann)))
            continue
        for arg in (ann, *typing.get_args(ann)):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                out += path_fields(arg, prefix + (name,))
    return out


def is_url(value: str) -> bool:
    return "://" in value


def _rebased(value, base: Path, always: bool):
    if not isinstance(value, str) or not value or is_url(value) or os.path.isabs(value):
        return value
    cand = os.path.normpath(base / value)  # as os.path.abspath would make it from that folder
    return cand if always or os.path.exists(cand) else value


def _rebase_at(cfg: dict, path: tuple, is_list: bool, base: Path) -> None:
    node = cfg
    for k in path[:-1]:
        node = node.get(k) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            return
    key = path[-1]
    if not isinstance(node, dict) or key not in node:
        return
    v = node[key]
    node[key] = [_rebased(x, base, False) for x in v] if is_list and isinstance(v, list) else _rebased(v, base, False)


def rebase(data: dict, base: Path) -> dict:
    """``data`` (a manifest mapping, ``${VAR}`` expanded) with relative read paths resolved against
    ``base``, the manifest's folder: ``inputs.paths`` always, marked stage and section settings
    where something exists there (else left for the setting's own lookup). Unknown stages and
    malformed entries are left for validation to report."""

    inputs = data.get("inputs")
    if isinstance(inputs, dict) and isinstance(inputs.get("paths"), list):
        inputs["paths"] = [_rebased(p, base, True) for p in inputs["paths"]]
    reg = registry()
    for item in data.get("stages") or []:
        if isinstance(item, dict) and len(item) == 1:
            (name, cfg), = item.items()
            if name in reg and isinstance(cfg, dict):
                for path, _, is_list in path_fields(reg[name].Config):
                    _rebase_at(cfg, path, is_list, base)
    for name, cls in section_classes().items():
        cfg = data.get(name)
        if isinstance(cfg, dict):
            for path, _, is_list in path_fields(cls):
                _rebase_at(cfg, path, is_list, base)
    return data
