"""Document ids as a terminal shows them: a short prefix in tables, and any unambiguous prefix
accepted where an id is asked for (``inspect --doc 00010d21e485``), as git does with commits."""
from __future__ import annotations

from datapipe.inspect.reader import InspectError, Run

#: Characters of an id shown in narrow tables (48 bits of a 128-bit hex id: no clash in a run of
#: millions of documents) and the fewest accepted as a prefix.
SHORT = 12
MIN_PREFIX = 4


def short_id(doc_id, width: int = SHORT) -> str:
    """``doc_id`` cut to ``width`` characters (ids that are short already are left whole)."""
    s = str(doc_id)
    return s if len(s) <= width + 2 else s[:width]


def resolve_id(run: Run, given: str) -> str:
    """The id of the one document whose id is ``given`` or starts with it.

    Raises InspectError naming up to five matches when the prefix is ambiguous, when it is shorter
    than ``MIN_PREFIX`` characters and not a whole id, or when nothing matches."""
    kinds = [k for k in ("kept", "rejected", "errors") if run.files(k)]
    if any(run.query(f"SELECT count(*) AS n FROM {run.source(k)} WHERE id = ?", [given]).column("n")[0].as_py()
           for k in kinds):
        return given
    if len(given) < MIN_PREFIX:
        raise InspectError(f"no document with id {given!r} in {run.url} (an id prefix needs at least "
                           f"{MIN_PREFIX} characters)")
    found: set[str] = set()
    for k in kinds:
        t = run.query(f"SELECT DISTINCT id FROM {run.source(k)} WHERE starts_with(id, ?) ORDER BY id LIMIT 6", [given])
        found.update(t.column("id").to_pylist())
    if not found:
        raise InspectError(f"no document with id {given!r} (or an id starting so) in {run.url}")
    if len(found) > 1:
        some = sorted(found)[:5]
        raise InspectError(f"id prefix {given!r} is ambiguous: {', '.join(some)}{', ...' if len(found) > 5 else ''}; "
                           "give more characters")
    return found.pop()
