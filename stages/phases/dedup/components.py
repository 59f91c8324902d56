"""Connected components in distributed rounds: alternating large-star / small-star
(Kiveris et al., "Connected Components in MapReduce and Beyond", SoCC 2014).

Edges are stored in both directions, partitioned by the hash of ``src``, so each task sees the
whole neighbourhood of the nodes of its partition and nothing else. With ``m(u)`` the minimum of
``u`` and its neighbours considered:

* large-star: for each ``u``, connect every neighbour ``v > u`` to ``m(u)`` (all neighbours);
* small-star: for each ``u``, connect ``u`` and every neighbour ``v < u`` to ``m(u)`` (those
  smaller neighbours only).

Both keep connectivity; they converge to one star per component centred on its minimum node,
in O(log^2 n) rounds. Convergence is detected when an iteration's input edge set (an
order-free 64-bit fingerprint plus its size) equals the previous one.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from datapipe.stages.phases.dedup.steps import EDGES, Ctx, _first_of_groups, _write_edges, shard_of
from datapipe.stages.phases.dedup.shuffle_store import U64, mix64

MAX_ITERATIONS = 64


def _read(ctx: Ctx, step: str, k: int) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
    t = ctx.work.gather(step, k, EDGES)
    e = np.unique(np.stack([t.column("src").to_numpy(), t.column("dst").to_numpy()], axis=1), axis=0) \
        if t.num_rows else np.zeros((0, 2), U64)
    e = e[e[:, 0] != e[:, 1]]
    fp = int(mix64(mix64(e[:, 0]) ^ e[:, 1]).sum(dtype=U64)) if len(e) else 0
    return e[:, 0], e[:, 1], (len(e), fp)


def _group_min(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For src-sorted edges: (first-row mask, per-row min(src, min dst of the group))."""
    first = _first_of_groups([src])
    start = np.flatnonzero(first)
    m = np.minimum(np.minimum.reduceat(dst, start), src[start]) if len(start) else np.zeros(0, U64)
    return first, np.repeat(m, np.diff(np.r_[start, len(src)]))


def star_round(ctx: Ctx, step_in: str, step_out: str, k: int, large: bool) -> tuple[int, int]:
    """One large- or small-star pass over partition ``k``; returns the input (size, fingerprint)."""
    src, dst, fp = _read(ctx, step_in, k)  # np.unique sorted the rows by (src, dst)
    if large:
        _, m = _group_min(src, dst)
        sel = dst > src
        _write_edges(ctx, dst[sel], m[sel], step_out, f"r{k}")
    else:
        sel = dst < src
        s, d = src[sel], dst[sel]
        first, m = _group_min(s, d)
        keep = d != m
        _write_edges(ctx, np.r_[d[keep], s[first]], np.r_[m[keep], m[first]], step_out, f"r{k}")
    return fp


def labels(ctx: Ctx, step_in: str, step_out: str, k: int) -> int:
    """Final pass: (node, component) for every node of partition ``k``, scattered by shard."""
    src, dst, _ = _read(ctx, step_in, k)
    first, m = _group_min(src, dst)
    t = pa.table({"node": src[first], "comp": m[first]})
    ctx.work.scatter(step_out, t, shard_of(src[first]), f"r{k}")
    return t.num_rows


def connected_components(client, ctx: Ctx, step: str = "cc0") -> tuple[str, int]:
    """Run star rounds from edge step ``step`` until the edge set stops changing; write labels
    to step ``"labels"``. Returns (labels step, iterations). Raises RuntimeError after
    ``MAX_ITERATIONS`` iterations (not expected: convergence is O(log^2 n))."""
    parts = range(ctx.nparts)
    prev = None
    for it in range(MAX_ITERATIONS):
        a, b = f"cc{2 * it + 1}", f"cc{2 * it + 2}"
        fps = client.gather(client.map(star_round, [ctx] * ctx.nparts, [step] * ctx.nparts, [a] * ctx.nparts,
                                       parts, [True] * ctx.nparts, pure=False))
        client.gather(client.map(star_round, [ctx] * ctx.nparts, [a] * ctx.nparts, [b] * ctx.nparts,
                                 parts, [False] * ctx.nparts, pure=False))
        cur = (sum(f[0] for f in fps), sum(f[1] for f in fps) % (1 << 64))
        ctx.work.rm(a)
        if cur == prev:
            client.gather(client.map(labels, [ctx] * ctx.nparts, [step] * ctx.nparts, ["labels"] * ctx.nparts,
                                     parts, pure=False))
            return "labels", it + 1
        if step != "cc0":
            ctx.work.rm(step)
        prev, step = cur, b
    raise RuntimeError(f"connected components did not converge in {MAX_ITERATIONS} iterations")
