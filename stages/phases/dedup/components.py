"""Connected components in distributed rounds: alternating large-star / small-star
(Kiveris et al., "Connected Components in MapReduce and Beyond", SoCC 2014), streamed.

Edges are stored in both directions, partitioned by the hash of ``src``, so each task sees the
whole neighbourhood of the nodes of its partition. With ``m(u)`` the minimum of ``u`` and its
neighbours considered:

* large-star: for each ``u``, connect every neighbour ``v > u`` to ``m(u)`` (all neighbours);
* small-star: for each ``u``, connect ``u`` and every neighbour ``v < u`` to ``m(u)`` (those
  smaller neighbours only).

Both keep connectivity and converge to one star per component centred on its minimum node.
Each task reads its partition twice, segment by segment: first ``m(u)`` per distinct ``u``
(memory: the nodes of the partition), then the edges it emits, so the centre of a million-member
cluster costs its one ``m`` value, not its million edges. Converged when an iteration changes
nothing: no large-star edge moved to a smaller centre and no node had two smaller neighbours
(then every component is a star on its minimum). Duplicate edges do not affect that test.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from datapipe.engine.shuffle_store import U64, partition_of
from datapipe.stages.phases.dedup.near import write_edges
from datapipe.stages.phases.dedup.steps import (
    EDGES,
    NEAR,
    Ctx,
    node_rows,
    order_cols,
    order_schema,
    pick_representatives,
    shard_of,
)

MAX_ITERATIONS = 64
LABELS = pa.schema([("node", pa.uint64()), ("comp", pa.uint64())])


def _edges(seg: pa.Table, smaller_only: bool) -> tuple[np.ndarray, np.ndarray]:
    src, dst = seg.column("src").to_numpy(), seg.column("dst").to_numpy()
    keep = (dst < src) if smaller_only else (dst != src)
    return src[keep], dst[keep]


def _min_by_src(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct src sorted, min(src, min dst of its edges))."""
    order = np.lexsort((dst, src))
    src, dst = src[order], dst[order]
    first = np.r_[True, src[1:] != src[:-1]] if len(src) else np.zeros(0, bool)
    u = src[first]
    return u, np.minimum(u, dst[first])


def _neighbour_min(ctx: Ctx, step: str, k: int, smaller_only: bool) -> tuple[np.ndarray, np.ndarray]:
    us, ms, acc = [], [], 0
    for seg in ctx.work.segments(step, k, EDGES):
        u, m = _min_by_src(*_edges(seg, smaller_only))
        us.append(u)
        ms.append(m)
        acc += len(u)
        if len(us) > 1 and acc > ctx.flush_rows:
            u, m = _min_by_src(np.concatenate(us), np.concatenate(ms))
            us, ms, acc = [u], [m], len(u)
    if not us:
        return np.zeros(0, U64), np.zeros(0, U64)
    return _min_by_src(np.concatenate(us), np.concatenate(ms))


def star_round(ctx: Ctx, k: int, step_in: str, step_out: str, large: bool) -> int:
    """One large- or small-star pass over partition ``k``; returns the changes it made."""
    u, m = _neighbour_min(ctx, step_in, k, smaller_only=not large)
    changes = 0
    with ctx.writer(step_out, f"r{k}", EDGES) as w:
        for seg in ctx.work.segments(step_in, k, EDGES):
            src, dst = _edges(seg, smaller_only=not large)
            mu = m[np.searchsorted(u, src)]
            if large:
                sel = dst > src
                a, b = dst[sel], mu[sel]
                changes += int(np.count_nonzero(b != src[sel]))
            else:
                sel = dst != mu
                a, b = dst[sel], mu[sel]
                changes += len(a)
            ab = np.unique(np.stack([a, b], axis=1), axis=0) if len(a) else np.zeros((0, 2), U64)
            write_edges(ctx, w, ab[:, 0], ab[:, 1])
        if not large:
            write_edges(ctx, w, u, m)   # each node with a smaller neighbour joins its minimum
    return changes


def labels(ctx: Ctx, k: int, step_in: str) -> int:
    """Final pass: (node, component) for every node of partition ``k``, scattered by shard."""
    u, m = _neighbour_min(ctx, step_in, k, smaller_only=False)
    with ctx.writer("labels", f"r{k}", LABELS) as w:
        w.add(pa.table({"node": u, "comp": m}, schema=LABELS), shard_of(u))
    return len(u)


def connected_components(run_step, ctx: Ctx, step: str = "cc0") -> tuple[str, int]:
    """Star rounds from edge step ``step`` until an iteration changes nothing; labels to step
    ``"labels"``. ``run_step(name, fn, items, *extra)`` runs one step's tasks (see phase.py).
    Returns (labels step, iterations). Raises RuntimeError after ``MAX_ITERATIONS``."""
    parts = range(ctx.nparts)
    for it in range(MAX_ITERATIONS):
        a, b = f"cc{2 * it + 1}", f"cc{2 * it + 2}"
        ch_large = sum(run_step(a, star_round, parts, step, a, True, cleanup=[] if step == "cc0" else [step]))
        ch_small = sum(run_step(b, star_round, parts, a, b, False, cleanup=[a]))
        step = b
        if ch_large == 0 and ch_small == 0:
            run_step("labels", labels, parts, step)
            return "labels", it + 1
    raise RuntimeError(f"connected components did not converge in {MAX_ITERATIONS} iterations")


# -- representatives of near-duplicate components ------------------------------------------------
_COMP = [pa.field("comp", pa.uint64())]


def comps_map(ctx: Ctx, i: int) -> int:
    """Survivor-rule columns of shard ``i``'s clustered nodes, scattered by component."""
    lab = ctx.work.gather("labels", i, LABELS)   # at most one row per document of the shard
    with ctx.writer("comps", f"s{i}", order_schema(ctx, _COMP)) as w:
        if lab.num_rows:
            rows = node_rows(lab.column("node").to_numpy())
            out = pa.table({"comp": lab.column("comp"), **order_cols(ctx, ctx.shard(i), rows)})
            w.add(out, partition_of(lab.column("comp").to_numpy(), ctx.nparts))
    return lab.num_rows


def comps_reduce(ctx: Ctx, k: int) -> dict[str, int]:
    return pick_representatives(ctx, "comps", k, _COMP, NEAR, "drops_near")
