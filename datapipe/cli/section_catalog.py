"""The phase sections of a manifest (``dedup``, ``mix``, ``tokenize``, ``report``, ...) as
``datapipe stages`` lists them: every setting with its type, default and range, nested settings
spelled as a manifest's dotted override (``minhash.threshold``), read from the same pydantic
classes the manifest is validated with."""
from __future__ import annotations

import inspect
import json
import sys

from pydantic import BaseModel

from datapipe.cli.schema_words import source_of, type_name, value_range
from datapipe.phase import phases


def _nested(annotation) -> type[BaseModel] | None:
    for a in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(a, type) and issubclass(a, BaseModel):
            return a
    return None


def section_fields(model: type[BaseModel], prefix: str = "", default=None) -> list[dict]:
    """``[{field, type, default, range, required}]`` of ``model``, nested models flattened
    (``field`` dotted). ``default``: an instance whose values are the defaults (else the class's)."""

    props = model.model_json_schema().get("properties", {})
    out = []
    for name, info in model.model_fields.items():
        sub = _nested(info.annotation)
        if info.is_required():
            value = None
        elif default is not None:
            value = getattr(default, name)
        else:
            value = info.get_default(call_default_factory=True)
        if sub is not None and isinstance(value, BaseModel):
            out += section_fields(sub, f"{prefix}{name}.", value)
            continue
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json")
        out.append({"field": prefix + name, "type": type_name(props.get(name, {})),
                    "default": json.loads(json.dumps(value, default=str)), "range": value_range(props.get(name, {})),
                    "required": info.is_required()})
    return out


def section_catalog() -> list[dict]:
    """Every phase section, in run order: ``name`` (the manifest key), ``kind`` ("phase section"),
    ``phase``, ``class``, ``source``, ``doc``, ``config`` (``section_fields``)."""

    out, seen = [], set()
    for ph in phases():
        for key, cls in ph.sections.items():
            if key in seen:
                continue
            seen.add(key)
            doc = inspect.cleandoc(cls.__doc__ or sys.modules[ph.__module__].__doc__ or "")
            out.append({"name": key, "kind": "phase section", "phase": ph.name,
                        "class": f"{cls.__module__}.{cls.__qualname__}", "source": source_of(cls), "doc": doc,
                        "config": section_fields(cls)})
    return out
