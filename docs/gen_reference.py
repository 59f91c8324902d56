"""Reference pages generated from the code: the manifest schema, one page per stage and one per phase.

    python docs/gen_reference.py [OUT_DIR]      # default docs/reference (git-ignored)

The pages read the same sources as ``datapipe stages`` and ``datapipe schema``
(``datapipe.cli.catalog.stage_catalog`` and ``manifest_schema``: the pydantic classes a manifest is
validated with) and the phase registry (``datapipe.phase.phases``), so they cannot drift from
what ``datapipe run`` accepts. ``make docs`` runs this through the MkDocs hook ``docs/hooks.py``
before building, and a test builds them too. Writes Markdown only; returns the pages written.
"""
from __future__ import annotations

import inspect
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _md(text: str) -> str:
    """A docstring paragraph as Markdown: ``x`` -> `x`, one line."""
    return re.sub(r"``([^`]+)``", r"`\1`", " ".join(text.split()))


def _first_paragraph(doc: str) -> str:
    return _md(doc.split("\n\n", 1)[0]) if doc else "(no docstring)"


def _cell(value) -> str:
    """A table cell: JSON of a default, escaped for Markdown tables."""
    s = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(s) > 80:
        s = s[:77] + "..."
    return "`" + s.replace("|", "\\|").replace("`", "'") + "`" if s else ""


def _deref(frag: dict, defs: dict) -> dict:
    """The fragment a ``$ref`` (or an ``anyOf`` of one ``$ref`` and null) points to, else None."""
    if "$ref" in frag:
        return defs[frag["$ref"].rsplit("/", 1)[1]]
    refs = [x for x in frag.get("anyOf", []) if "$ref" in x]
    if len(refs) == 1 and all("$ref" in x or x.get("type") == "null" for x in frag["anyOf"]):
        return defs[refs[0]["$ref"].rsplit("/", 1)[1]]
    return None


def schema_rows(obj: dict, defs: dict, prefix: str = "") -> list[tuple[str, str, str, str, str]]:
    """``(setting, type, default, range, description)`` of every field of a JSON Schema object,
    nested objects flattened to dotted names (``minhash.threshold``)."""
    from datapipe.cli.schema_words import type_name, value_range

    rows = []
    for name, frag in obj.get("properties", {}).items():
        key = f"{prefix}{name}"
        sub = _deref(frag, defs)
        desc = _md(frag.get("description", "") or (sub or {}).get("description", "").split("\n\n")[0])
        if sub is not None and sub.get("properties"):
            rows.append((key, "object", _cell(frag["default"]) if "default" in frag else "", "", desc))
            rows += schema_rows(sub, defs, key + ".")
            continue
        required = name in obj.get("required", [])
        default = "(required)" if required else (_cell(frag["default"]) if "default" in frag else "")
        rows.append((key, type_name(frag).replace("|", "\\|"), default, value_range(frag), desc))
    return rows


def _table(rows, head=("setting", "type", "default", "range", "description")) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def stage_reasons(cls, doc: str) -> list[tuple[str, str, str]]:
    """``(reason, rule, settings)`` of a stage: its declared rules (``Stage.rules``), then every
    ``name:rule`` its docstrings name."""
    out, seen = [], set()
    for rule in cls.rules:
        full = rule.reason + (f":<{rule.reason_from}[0]>" if rule.reason_from else "")
        if full not in seen:
            seen.add(full)
            out.append((full, rule.describe(), ", ".join(rule.params)))
    text = doc + "\n" + (sys.modules[cls.__module__].__doc__ or "")
    for m in re.finditer(rf"\b{re.escape(cls.name)}:([a-z0-9_]+)\b", text):
        full = f"{cls.name}:{m.group(1)}"
        if full not in seen:
            seen.add(full)
            out.append((full, "", ""))
    return out


def stage_page(st: dict, cls) -> str:
    types = {f.name: str(f.type) for f in cls.fields}
    lines = [f"# Stage `{st['name']}`", "", _first_paragraph(st["doc"]), "",
             f"Defined in `{st['source']}` (`{st['class']}`), version {getattr(cls, 'version', 1)}.", ""]
    lines += ["```yaml", "stages:", f"  - {st['name']}: {{}}   # every setting at its default", "```", ""]
    lines += ["## Settings", ""]
    if st["config"]:
        lines += _table([(f"`{f['field']}`", f["type"].replace("|", "\\|"),
                          "(required)" if f["required"] else _cell(f["default"]), f["range"], "")
                         for f in st["config"]], head=("setting", "type", "default", "range", ""))
    else:
        lines.append("None.")
    reads = (["payload (the raw page)"] if st["needs"] else ["text"]) + \
        [f"{c} (required)" if c in st["requires"] else c for c in st["reads"]]
    lines += ["", "## Columns", "", f"- reads: {', '.join(f'`{c}`' for c in reads)}"]
    if st["edits"]:
        lines.append(f"- edits: {', '.join(f'`{c}`' for c in st['edits'])} (the text before is kept in "
                     f"`text_before_{st['name']}` where it changed)")
    lines += ["", "Signal columns it adds:", ""]
    lines += _table([(f"`{c}`", f"`{types.get(c, '')}`") for c in st["adds"]], head=("column", "Arrow type")) \
        if st["adds"] else ["None."]
    reasons = stage_reasons(cls, st["doc"])
    lines += ["", "## Reasons", ""]
    if reasons:
        lines += _table([(f"`{r}`", f"`{c}`" if c else "", p) for r, c, p in reasons],
                        head=("reject reason", "rejects when", "settings"))
    else:
        lines.append("This stage adds signals only (or its reasons are not listed in its docstring).")
    recomputable = bool(cls.rules)
    lines += ["", f"`datapipe inspect --what-if` can recompute its decisions: {'yes' if recomputable else 'no'}.",
              "", "## Docstring", "", "```text", st["doc"] or "(none)"]
    if st["config_doc"]:
        lines += ["", "Config:", st["config_doc"]]
    lines += ["```", ""]
    return "\n".join(lines)


def phase_page(cls, schema: dict) -> str:
    defs = schema["$defs"]
    doc = inspect.cleandoc(cls.__doc__ or sys.modules[cls.__module__].__doc__ or "")
    src = f"{cls.__module__}.{cls.__qualname__}"
    lines = [f"# Phase `{cls.name}`", "", _first_paragraph(doc), "",
             (f"Class `{src}`, version {cls.version}. Reads: {', '.join(f'`{r}`' for r in cls.reads)}; "
             f"writes {', '.join(f'`{d.glob}` ({d.role})' for d in cls.writes)}"
             + (" (a documents transform: it reads the documents as the transform before it left them)"
                if cls.transforms_documents() else "")
             + f". Run it alone with `datapipe run MANIFEST --only {cls.name}`, or it and "
             f"every later phase with `--from {cls.name}`."), ""]
    for sec in cls.sections:
        lines += [f"## Section `{sec}:`", ""]
        frag = schema["properties"].get(sec, {})
        sub = _deref(frag, defs)
        if frag.get("description"):
            lines += [_md(frag["description"]), ""]
        rows = schema_rows(sub, defs) if sub else []
        lines += _table([(f"`{sec}.{r[0]}`", *r[1:]) for r in rows]) if rows else ["No settings."]
        lines.append("")
    if not cls.sections:
        lines += ["This phase has no manifest section: it runs whenever its inputs exist.", ""]
    lines += ["## Docstring", "", "```text", doc or "(none)", "```", ""]
    return "\n".join(lines)


def manifest_page(schema: dict) -> str:
    defs = schema["$defs"]
    top = {"properties": {k: v for k, v in schema["properties"].items() if k != "stages"},
           "required": schema.get("required", [])}
    phase_secs = {k for k, v in schema["properties"].items() if k != "stages" and _deref(v, defs) is not None
                  and k not in ("inputs", "cluster")}
    top["properties"] = {k: v for k, v in top["properties"].items() if k not in phase_secs}
    lines = ["# Manifest", "", ("A manifest is a YAML file: the job's inputs, output, cluster, the phase-1 `stages` in "
             "order (each `- name: {config}`) and the sections of the global phases. The same JSON Schema is "
             "printed by `datapipe schema`; `datapipe init` writes it beside a new manifest for editors."), "",
             "## Top-level settings", ""]
    lines += _table([(f"`{r[0]}`", *r[1:]) for r in schema_rows(top, defs)])
    lines += ["", "## Stages", "", ("`stages:` is a list of one-key mappings, a registered stage name to its "
              "config (or nothing, for the defaults):"), ""]
    for item in schema["properties"]["stages"]["items"]["oneOf"]:
        lines.append(f"- [`{item['title']}`](stages/{item['title']}.md): {_md(item.get('description', ''))}")
    lines += ["", "## Phase sections", ""]
    for sec in sorted(phase_secs):
        lines.append(f"- `{sec}:` {_md(schema['properties'][sec].get('description', ''))}")
    lines.append("")
    return "\n".join(lines)


def write(out: Path = HERE / "reference") -> list[Path]:
    """Write every reference page under ``out`` (replacing what was there); returns the paths."""
    import shutil

    from datapipe.cli.catalog import manifest_schema, stage_catalog
    from datapipe.phase import phases
    from datapipe.stage import registry

    schema, reg = manifest_schema(), registry()
    if out.exists():
        shutil.rmtree(out)
    (out / "stages").mkdir(parents=True)
    (out / "phases").mkdir()
    pages = {out / "manifest.md": manifest_page(schema)}
    catalog = stage_catalog()
    for st in catalog:
        pages[out / "stages" / f"{st['name']}.md"] = stage_page(st, reg[st["name"]])
    plist = phases()
    for cls in plist:
        pages[out / "phases" / f"{cls.name}.md"] = phase_page(cls, schema)
    index = ["# Reference", "", ("Generated from the code at build time (`docs/gen_reference.py`): the same "
             "classes `datapipe run` validates a manifest with, so these pages say what it accepts."), "",
             "- [Manifest](manifest.md): top-level settings, `inputs`, `cluster`, the list of stages and phase sections",
             "", "## Stages (phase 1, per document)", ""]
    index += [f"- [`{st['name']}`](stages/{st['name']}.md): {_first_paragraph(st['doc'])}" for st in catalog]
    index += ["", "## Phases (global, in run order)", ""]
    index += [f"- [`{c.name}`](phases/{c.name}.md): "
              f"{_first_paragraph(inspect.cleandoc(c.__doc__ or sys.modules[c.__module__].__doc__ or ''))}"
              for c in plist]
    pages[out / "index.md"] = "\n".join(index) + "\n"
    for path, text in pages.items():
        path.write_text(text, encoding="utf-8")
    return sorted(pages)


def nav(out: Path = HERE / "reference") -> list:
    """The reference section of the MkDocs nav for pages under ``out`` (paths relative to docs/)."""
    rel = lambda p: str(p.relative_to(out.parent))
    return [{"Overview": rel(out / "index.md")}, {"Manifest": rel(out / "manifest.md")},
            {"Stages": [{p.stem: rel(p)} for p in sorted((out / "stages").glob("*.md"))]},
            {"Phases": [{p.stem: rel(p)} for p in sorted((out / "phases").glob("*.md"), key=_phase_rank)]}]


def _phase_rank(p: Path) -> int:
    from datapipe.phase import phases

    names = [c.name for c in phases()]
    return names.index(p.stem) if p.stem in names else len(names)


if __name__ == "__main__":
    for p in write(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "reference"):
        print(p)
