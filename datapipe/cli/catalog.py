"""``datapipe stages`` (every stage, its settings, defaults and ranges) and ``datapipe schema``
(the manifest's JSON Schema, for editors): both read the same pydantic classes the manifest is
validated with, so they cannot drift from what ``datapipe run`` accepts."""
from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from datapipe.cli.commands import COMMANDS
from datapipe.cli.schema_words import source_of, type_name, value_range
from datapipe.cli.section_catalog import section_catalog
from datapipe.cli.termfmt import cannot_write, ellipsize
from datapipe.manifest.load import Manifest
from datapipe.manifest.suggest import did_you_mean
from datapipe.phase import section_classes
from datapipe.stage import registry
from datapipe.stages import names

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def add_cli(sub) -> None:
    """Register ``stages`` and ``schema``."""
    p = sub.add_parser("stages", help=COMMANDS["stages"].help,
                       description="Every registered stage with its config fields (type, default, allowed range), "
                                   "the columns it reads and adds, and its source; then every phase section "
                                   "(dedup, mix, tokenize, report, ...) with its settings, nested ones dotted. "
                                   "With NAME: that stage or section's whole docstring too.")
    p.add_argument("name", nargs="?", metavar="NAME", help="one stage or phase section (e.g. gopher_quality, dedup)")
    p.add_argument("--json", action="store_true", help="print JSON (every default in full)")
    p.set_defaults(func=cmd_stages)
    s = sub.add_parser("schema", help=COMMANDS["schema"].help,
                       description="The JSON Schema (draft 2020-12) of a manifest: top-level keys, each stage's "
                                   "config, each phase section. Point an editor at it (e.g. a "
                                   "'# yaml-language-server: $schema=datapipe.formats.documents.json' first line).")
    s.add_argument("--out", metavar="FILE", help="write to FILE instead of standard output")
    s.set_defaults(func=cmd_schema)


# ----------------------------------------------------------------------------- the catalogue

def stage_catalog() -> list[dict]:
    """Every registered stage, in registration order: ``name``, ``class``, ``source`` (file:line),
    ``doc`` (class docstring), ``config_doc``, ``reads`` (columns besides text: ``Stage.reads``),
    ``requires`` (those it cannot decide without), ``adds`` (signal columns), ``edits``, ``needs``, ``config``: ``[{field, type, default, range, required}]``,
    ``rules``: the decision rules it declares, in order, ``[{reason, column, op, threshold, rule}]``
    (``threshold``: the config field holding it, or null for a fixed limit; ``rule``: in words)."""

    out = []
    for name, cls in registry().items():
        schema = cls.Config.model_json_schema()
        props = schema.get("properties", {})
        fields = []
        for fname, info in cls.Config.model_fields.items():
            default = None if info.is_required() else info.get_default(call_default_factory=True)
            fields.append({"field": fname, "type": type_name(props.get(fname, {})),
                           "default": json.loads(json.dumps(default, default=str)),
                           "range": value_range(props.get(fname, {})), "required": info.is_required()})
        out.append({"name": name, "class": f"{cls.__module__}.{cls.__qualname__}", "source": source_of(cls),
                    "doc": inspect.cleandoc(cls.__doc__ or sys.modules[cls.__module__].__doc__ or ""),
                    "config_doc": inspect.cleandoc(cls.Config.__doc__ or "") if cls.Config.__doc__ else "",
                    "reads": list(cls.reads), "requires": list(cls.requires), "adds": [f.name for f in cls.fields],
                    "edits": list(cls.edits), "needs": list(cls.needs), "config": fields,
                    "rules": [{"reason": r.reason, "column": r.column, "op": r.op, "threshold": r.threshold,
                               "rule": r.describe()} for r in cls.rules]})
    return out


def _show_stage(out: Console, st: dict, full: bool) -> None:
    import textwrap

    out.rule(f"[bold]{st['name']}[/]", align="left")
    first = st["doc"].split("\n\n", 1)[0].replace("\n", " ") if st["doc"] else "(no docstring)"
    # Docstrings are laid out by their authors: printed as written (the terminal wraps long lines).
    out.print(st["doc"] if full else first, highlight=False, markup=False, soft_wrap=full)
    out.print(f"source: {st['source']}", highlight=False, markup=False)
    cols = [f"{c} (required)" if c in st["requires"] else c for c in st["reads"]]
    io = [("reads", ", ".join((["payload (the raw page)"] if st["needs"] else ["text"]) + cols)),
          ("adds", ", ".join(st["adds"]) or "–")]
    if st["edits"]:
        io.append(("edits", ", ".join(st["edits"])))
    if st["rules"] and not full:  # in full, one line a rule below
        io.append(("rejects", ", ".join(dict.fromkeys(r["reason"] for r in st["rules"]))))
    for k, v in io:
        for line in textwrap.wrap(f"{k}: {v}", max(out.width, 20), subsequent_indent="    "):
            out.print(line, highlight=False, markup=False, soft_wrap=True)
    for r in st["rules"] if full else ():
        out.print(f"rejects {r['reason']}: {r['rule']}", highlight=False, markup=False, soft_wrap=True)
    if full and st["config_doc"]:
        out.print(st["config_doc"], highlight=False, markup=False, soft_wrap=True)
    if not st["config"]:
        return
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    for col in ("setting", "type", "default", "range"):
        t.add_column(col, no_wrap=col in ("setting", "range"), overflow="ellipsis")
    for f in st["config"]:
        d = "(required)" if f["required"] else json.dumps(f["default"], ensure_ascii=False)
        t.add_row(*(Text(x) for x in (f["field"], f["type"], ellipsize(d, 60 if full else 28), f["range"] or "–")))
    out.print(t)


def _show_section(out: Console, sec: dict, full: bool) -> None:
    out.rule(f"[bold]{sec['name']}[/] (phase section of {sec['phase']})", align="left")
    first = sec["doc"].split("\n\n", 1)[0].replace("\n", " ") if sec["doc"] else "(no docstring)"
    out.print(sec["doc"] if full else first, highlight=False, markup=False, soft_wrap=full)
    out.print(f"source: {sec['source']}", highlight=False, markup=False)
    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    for col in ("setting", "type", "default", "range"):
        t.add_column(col, no_wrap=col in ("setting", "range"), overflow="ellipsis")
    for f in sec["config"]:
        d = "(required)" if f["required"] else json.dumps(f["default"], ensure_ascii=False)
        t.add_row(*(Text(x) for x in (f["field"], f["type"], ellipsize(d, 60 if full else 28), f["range"] or "–")))
    out.print(t)


def cmd_stages(args) -> int:

    out, err = Console(), Console(stderr=True, soft_wrap=True)
    cat = [s | {"kind": "stage"} for s in stage_catalog()]
    secs = section_catalog()
    if args.name:
        cat, secs = [s for s in cat if s["name"] == args.name], [s for s in secs if s["name"] == args.name]
        if not cat and not secs:

            known = names() + [s["name"] for s in section_catalog()]
            err.print("[bold red]error:[/] " + escape(
                f"unknown stage or phase section {args.name!r}{did_you_mean(args.name, known)}; "
                f"stages: {', '.join(names())}; phase sections: {', '.join(s['name'] for s in section_catalog())}"),
                highlight=False)
            return 2
    if args.json:
        sys.stdout.write(json.dumps(cat + secs, indent=2) + "\n")
        return 0
    for st in cat:
        _show_stage(out, st, full=bool(args.name))
    for sec in secs:
        _show_section(out, sec, full=bool(args.name))
    if not args.name:
        out.print("one stage or section in full: datapipe stages NAME; everything as JSON: datapipe stages --json",
                  highlight=False)
    return 0


# ------------------------------------------------------------------------------- the schema

def manifest_schema() -> dict:
    """The JSON Schema of a manifest: ``Manifest``'s fields, ``stages`` items as one-key mappings
    of a registered stage to its config, and every phase section (``dedup``, ``mix``, ``tokenize``,
    ``report``...) with its own class. Internal fields (``sections``, ``source_file``) are left out."""
    from pydantic.json_schema import models_json_schema


    reg, sections = registry(), section_classes()
    models = []
    for m in [Manifest, *(c.Config for c in reg.values()), *sections.values()]:
        if m not in models:
            models.append(m)
    refs, defs = models_json_schema([(m, "validation") for m in models], ref_template="#/$defs/{model}")
    defs = defs["$defs"]
    top = defs.pop(refs[(Manifest, "validation")]["$ref"].rsplit("/", 1)[1])
    props = top["properties"]
    for internal in ("sections", "source_file"):
        props.pop(internal, None)
    stage_items = []
    for name, cls in reg.items():
        doc = inspect.cleandoc(cls.__doc__ or "").split("\n\n", 1)[0].replace("\n", " ")
        stage_items.append({"type": "object", "title": name, "description": doc,
                            "properties": {name: {"anyOf": [refs[(cls.Config, "validation")], {"type": "null"}]}},
                            "required": [name], "additionalProperties": False})
    props["stages"] = {"type": "array", "description": "Phase-1 stages in order, each `- name: {config}`.",
                       "items": {"oneOf": stage_items}, "default": []}
    for name, cls in sections.items():
        props[name] = {"anyOf": [refs[(cls, "validation")], {"type": "null"}],
                       "description": inspect.cleandoc(cls.__doc__ or "").split("\n\n", 1)[0].replace("\n", " ")}
    return {"$schema": SCHEMA_DIALECT, "title": "datapipe manifest", **top, "$defs": defs}


def cmd_schema(args) -> int:
    text = json.dumps(manifest_schema(), indent=2) + "\n"
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as e:  # --out in a folder that does not exist, or a folder itself
            return cannot_write(Console(stderr=True, soft_wrap=True), "the schema", e)
        Console(stderr=True, soft_wrap=True).print(f"schema: {args.out}", highlight=False)
    else:
        sys.stdout.write(text)
    return 0
