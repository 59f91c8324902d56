"""Short words for the catalogue (``datapipe stages``): a JSON Schema fragment's type and range, a
class's source location."""
from __future__ import annotations

import inspect
import json
from pathlib import Path

from datapipe.env import REPO_ROOT


def type_name(s: dict) -> str:
    """A short type name of a JSON Schema fragment (``float | None``, ``list[str]``...)."""
    if "anyOf" in s:
        return " | ".join(dict.fromkeys(type_name(x) for x in s["anyOf"]))
    if "enum" in s:
        return " | ".join(json.dumps(v) for v in s["enum"])
    if "const" in s:
        return json.dumps(s["const"])
    t = s.get("type")
    if t == "array":
        return f"list[{type_name(s.get('items', {}))}]" if s.get("items") else "list"
    if t == "object":
        v = s.get("additionalProperties")
        return f"dict[str, {type_name(v)}]" if isinstance(v, dict) else "dict"
    return {"integer": "int", "number": "float", "string": "str", "boolean": "bool", "null": "None"}.get(t, t or "any")


def value_range(s: dict) -> str:
    """``[0, 1]``, ``>= 1``, ``(0, 1)``... of a fragment (numbers inside ``anyOf``/maps too); '' if none."""
    inner = s.get("additionalProperties")
    for part in s.get("anyOf", []) + ([inner] if isinstance(inner, dict) else []):
        r = value_range(part)
        if r:
            return r
    lo, lo_x = (s["minimum"], False) if "minimum" in s else (s.get("exclusiveMinimum"), True)
    hi, hi_x = (s["maximum"], False) if "maximum" in s else (s.get("exclusiveMaximum"), True)
    if lo is not None and hi is not None:
        return f"{'(' if lo_x else '['}{lo:g}, {hi:g}{')' if hi_x else ']'}"
    if lo is not None:
        return f"{'>' if lo_x else '>='} {lo:g}"
    if hi is not None:
        return f"{'<' if hi_x else '<='} {hi:g}"
    return ""


def source_of(cls) -> str:
    """``stages/gopher.py:342``: where the class is defined, relative to the checkout when inside it."""
    try:
        path = Path(inspect.getsourcefile(cls) or "")
        line = inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        return cls.__module__
    root = REPO_ROOT
    try:
        path = path.resolve().relative_to(root)
    except ValueError:
        pass
    return f"{path}:{line}"
