"""Loading YAML that a user hands us (manifests, a ledger's manifest, ``--what-if`` values) without
letting its size explode.

YAML aliases (``*name``) repeat the node their anchor (``&name``) names, so a few hundred bytes of
nested aliases (the "billion laughs" pattern) expand to billions of nodes: a 528-byte manifest
exhausted memory while it was validated. ``safe_load`` walks the parser's events first (linear in
the text, nothing built) and counts the nodes the document expands to, an alias counting as the
whole subtree it repeats; more than ``MAX_NODES``, an alias to its own enclosing node (a cycle) or
nesting deeper than ``MAX_DEPTH`` is refused with the line of the alias or node, before
``yaml.safe_load`` builds anything. Small aliases (a shared block of stage settings) still work.
"""
from __future__ import annotations

import yaml

#: Nodes (scalars, sequences, mappings) a document may expand to; the shipped manifests hold a few
#: hundred, so this leaves room for any hand-written one and stops an alias bomb at a few MB.
MAX_NODES = 100_000
#: Nesting depth of sequences and mappings (PyYAML's composer recurses once per level).
MAX_DEPTH = 200


class YamlSizeError(ValueError):
    """The document would expand past ``MAX_NODES``, nest past ``MAX_DEPTH`` or refer to itself.
    ``line``: 1-based line of the alias or node where it was found; ``str()``: the reason."""

    def __init__(self, reason: str, line: int):
        super().__init__(reason)
        self.line = line


def check_expansion(text: str) -> int:
    """Number of nodes ``text`` expands to (aliases counted as the subtree they repeat).

    Raises YamlSizeError (above); yaml.YAMLError for text that is not YAML.
    """
    sizes: dict[str, int] = {}     # anchor -> nodes of its finished subtree
    open_anchors: set[str] = set()
    stack: list[list] = []         # [nodes so far, anchor] per open sequence/mapping
    total = 0

    def add(n: int, line: int) -> None:
        nonlocal total
        total += n
        if total > MAX_NODES:
            raise YamlSizeError(f"the document expands to more than {MAX_NODES:,} nodes through YAML "
                                "aliases (*name); write the values out instead", line)

    for ev in yaml.parse(text):
        line = ev.start_mark.line + 1
        if isinstance(ev, (yaml.AliasEvent, yaml.ScalarEvent)):
            if isinstance(ev, yaml.AliasEvent) and ev.anchor in open_anchors:
                raise YamlSizeError(f"alias *{ev.anchor} refers to a node that contains it (a cycle)", line)
            # an undefined alias counts 1 here: yaml.safe_load then names it
            n = sizes.get(ev.anchor, 1) if isinstance(ev, yaml.AliasEvent) else 1
            add(n, line)
            if stack:
                stack[-1][0] += n
            if isinstance(ev, yaml.ScalarEvent) and ev.anchor:
                sizes[ev.anchor] = 1
        elif isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            if len(stack) >= MAX_DEPTH:
                raise YamlSizeError(f"nested deeper than {MAX_DEPTH} levels", line)
            add(1, line)
            stack.append([1, ev.anchor])
            if ev.anchor:
                open_anchors.add(ev.anchor)
        elif isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            n, anchor = stack.pop()
            if stack:
                stack[-1][0] += n
            if anchor:
                open_anchors.discard(anchor)
                sizes[anchor] = n
    return total


def safe_load(text: str):
    """``yaml.safe_load(text)`` after ``check_expansion``. Raises YamlSizeError, yaml.YAMLError."""
    check_expansion(text)
    return yaml.safe_load(text)
