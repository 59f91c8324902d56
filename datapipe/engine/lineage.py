"""The one fingerprint function of the engine: what every lineage decision compares.

A task's prefix fingerprints, a chain's fingerprint, a phase's fingerprint and the check cache's
keys are all ``fingerprint(...)`` of plain JSON-able values: equal values give equal
fingerprints, on every machine and Python version (keys sorted, compact separators, non-JSON
values by ``str``).
"""
from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(obj: Any) -> str:
    """``obj`` as JSON with sorted keys (json.dumps' default separators); values JSON cannot hold become ``str(value)``."""
    return json.dumps(obj, sort_keys=True, default=str)


def digest(text: str | bytes, length: int | None = None) -> str:
    """sha256 (hex) of ``text`` (UTF-8 when a ``str``), cut to ``length`` characters when given."""
    data = text.encode() if isinstance(text, str) else text
    h = hashlib.sha256(data).hexdigest()
    return h[:length] if length else h


def fingerprint(*parts: Any, length: int | None = None) -> str:
    """sha256 (hex, 64 characters or ``length``) of the canonical JSON of the one part given, or of
    the list of the parts when several are given."""
    return digest(canonical_json(parts[0] if len(parts) == 1 else list(parts)), length)
