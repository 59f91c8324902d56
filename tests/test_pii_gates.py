"""The PII IP gates are exact: every match of the full IPv4/IPv6 patterns contains a gate match,
so skipping texts without one changes no span (realpages texts and hand-made addresses)."""

from datapipe.env import shared_data
from datapipe.stages.lib import pii_ip as P

PROBES = ["host 192.168.0.1 up", "1.2.3.4", "v1.2.3.4", "::1", "fe80::1", "2001:db8::ff00:42:8329",
          "::ffff:192.0.2.1", "a::b", "12:30:45", "1:2:3:4:5:6:7:8", "ab:cd:ef", "255.255.255.255.",
          "10.0.0.1:8080", "[2001:db8::1]:443", "x:y", "3.14", "1.2.3"]


def _texts():
    import gzip
    import json

    out = list(PROBES)
    for f in sorted((shared_data() / "cc_text").glob("*.jsonl.gz"))[:2]:
        with gzip.open(f, "rt", encoding="utf-8") as fh:
            out += [json.loads(line)["text"] for line in fh]
    return out


def test_every_ip_match_contains_its_gate():
    n4 = n6 = 0
    for t in _texts():
        for m in P._IPV4_RE.finditer(t):
            n4 += 1
            assert P._IPV4_GATE_RE.search(m.group()), m.group()
        for m in P._IPV6_RE.finditer(t):
            n6 += 1
            assert P._IPV6_GATE_RE.search(m.group()), m.group()
    assert n4 >= 4 and n6 >= 5  # the probes alone hold that many


def test_gated_ips_find_the_probes():
    got = {t: [t[a:b] for a, b, _ in P.ips(t)] for t in ("host 192.168.0.1 up", "2001:db8::ff00:42:8329", "12:30:45")}
    assert got == {"host 192.168.0.1 up": ["192.168.0.1"], "2001:db8::ff00:42:8329": ["2001:db8::ff00:42:8329"],
                   "12:30:45": []}
