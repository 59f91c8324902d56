"""IPv4 / IPv6 address spans for the ``pii`` stage (rules: the ``stages/pii.py`` docstring, **ip**)."""
from __future__ import annotations

import ipaddress
import re

from datapipe.stages.lib.pii_kinds import IP, Span

# Dotted quad not touching other digits/dots (so "192.0.2.146." keeps its full stop).
_IPV4_RE = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?!\.?\d)(?!\w)")
# Colon-hex token; an embedded IPv4 tail ("::ffff:192.0.2.1") is allowed.
_IPV6_RE = re.compile(
    r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:(?:\d{1,3}\.){3}\d{1,3}|[0-9A-Fa-f]{1,4})?(?![\w:])"
)
# A dotted quad right after one of these words is a version or a section number.
_VERSION_WORDS = frozenset(
    "version versions ver vers v release rel build rev revision firmware update patch driver kernel sdk api jdk "
    "jre section sec chapter ch clause paragraph para art article kapitel abschnitt absatz ziffer nr no number "
    "table fig figure step item rule standard iso rfc § beta alpha rc".split())
_VERSION_AFTER_RE = re.compile(r"\s*(?:beta|alpha|rc\d*|lts|final|build|-snapshot)\b", re.IGNORECASE)
# Words that announce an address, so a capitalised word before the quad is no product name.
_IP_WORDS_RE = re.compile(
    r"\b(?:ip(?:v4|s)?|address(?:es)?|adressen?|addr|server|hosts?|hostname|router|gateway|dns|proxy|resolver|"
    r"ping|inet|subnet|netmask|dhcp|lan|wan|vpn|nameserver|endpoint|firewall|client|peer)\b", re.IGNORECASE)


def version_context(text: str, start: int, end: int) -> bool:
    """True when the number at ``start:end`` reads as a version ("Firefox 115.0.2.1", "Chrome/59.0.3071.125",
    "section 1.2.3.4", "2.0.0.16 beta")."""
    before = text[max(0, start - 40):start].rsplit("\n", 1)[-1]
    if len(before) > 1 and before[-1] == "/" and before[-2].isalpha():
        return True  # a user-agent product token
    words = before.split()
    word = words[-1].strip("()[]:,;\"'") if words else ""
    if word.lower().rstrip(".") in _VERSION_WORDS or _VERSION_AFTER_RE.match(text, end):
        return True
    # A product name ("Java", "Opera"), unless an address word comes just before it ("DNS-Server Cloudflare 1.1.1.1").
    return word[:1].isupper() and not _IP_WORDS_RE.search(" ".join(words[-3:]))


# Substrings every match of the patterns above contains, found by a fast literal-prefix scan: a text
# without one has no match, and the full patterns (which try every position) are skipped.
_IPV4_GATE_RE = re.compile(r"\.\d{1,3}\.\d{1,3}\.\d")
_IPV6_GATE_RE = re.compile(r":[0-9A-Fa-f]{0,4}:")


def ips(text: str) -> list[Span]:
    out = []
    for m in (_IPV4_RE.finditer(text) if _IPV4_GATE_RE.search(text) else ()):
        try:
            ipaddress.IPv4Address(m.group())
        except ValueError:
            continue
        if not version_context(text, m.start(), m.end()):
            out.append((m.start(), m.end(), IP))
    if ":" in text and _IPV6_GATE_RE.search(text):
        for m in _IPV6_RE.finditer(text):
            s = m.group()
            groups = [g for g in s.split(":") if g]
            # Two non-empty groups and a digit keep C++ "a::b" and clock times out; "::1" is the loopback.
            loopback_like = s.startswith("::") and len(groups) == 1 and groups[0].isdigit()
            if not any(c.isdigit() for c in s) or (len(groups) < 2 and not loopback_like):
                continue
            try:
                ipaddress.IPv6Address(s)
            except ValueError:
                continue
            out.append((m.start(), m.end(), IP))
    return out
